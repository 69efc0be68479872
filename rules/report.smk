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


rule r2med_vs_paper:
    input:
        metrics=metric_files(),
        stats=stats_files(),
        table=paper_table(),
    output:
        "results/r2med_vs_paper.md",
    params:
        report=r2med_report_params(),
    log:
        "logs/r2med_vs_paper/r2med_vs_paper.log",
    benchmark:
        "benchmarks/r2med_vs_paper/r2med_vs_paper.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/r2med_vs_paper.py"
