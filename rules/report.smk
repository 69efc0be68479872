# Stage: report. The leaderboard over every scored run.


rule leaderboard:
    input:
        metric_files(),
    output:
        csv="results/leaderboard.csv",
        md="results/leaderboard.md",
    params:
        metric=CFG["leaderboard"]["metric"],
    log:
        "logs/leaderboard/leaderboard.log",
    benchmark:
        "benchmarks/leaderboard/leaderboard.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/leaderboard.py"
