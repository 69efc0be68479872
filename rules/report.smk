# Stage: report. Leaderboards, significance against the baseline, plots and provenance over every scored run.
# Outputs marked with report() go into `snakemake --report report.html`; captions are in report/*.rst.


report: "../report/workflow.rst"


rule significance:
    input:
        per_query_files(),
    output:
        csv=report(
            "results/significance.csv",
            caption="../report/significance.rst",
            category="Significance",
            labels={"table": "significance against the baseline"},
        ),
        md="results/significance.md",
    params:
        report=report_params(),
    log:
        "logs/significance/significance.log",
    benchmark:
        "benchmarks/significance/significance.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/significance.py"


rule leaderboard:
    input:
        metrics=metric_files(),
        significance="results/significance.csv",
    output:
        csv=report(
            "results/leaderboard.csv",
            caption="../report/leaderboard.rst",
            category="Leaderboard",
            labels={"benchmark": "all", "format": "CSV"},
        ),
        md="results/leaderboard.md",
        html=report(
            "results/leaderboard.html",
            caption="../report/leaderboard.rst",
            category="Leaderboard",
            labels={"benchmark": "all", "format": "HTML"},
        ),
    params:
        metric=CFG["leaderboard"]["metric"],
        report=report_params(),
    log:
        "logs/leaderboard/leaderboard.log",
    benchmark:
        "benchmarks/leaderboard/leaderboard.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/leaderboard.py"


rule leaderboard_benchmark:
    input:
        metrics=benchmark_metric_files,
        significance="results/significance.csv",
    output:
        csv="results/leaderboards/{benchmark}.csv",
        md="results/leaderboards/{benchmark}.md",
        html=report(
            "results/leaderboards/{benchmark}.html",
            caption="../report/leaderboard.rst",
            category="Leaderboard",
            labels={"benchmark": "{benchmark}", "format": "HTML"},
        ),
    params:
        report=report_params(),
    log:
        "logs/leaderboard_benchmark/{benchmark}.log",
    benchmark:
        "benchmarks/leaderboard_benchmark/{benchmark}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/leaderboard_benchmark.py"


rule plot_leaderboard:
    input:
        benchmark_metric_files,
    output:
        by_task_png=report(
            "results/plots/{benchmark}/by_task.png",
            caption="../report/by_task.rst",
            category="Plots",
            subcategory="{benchmark}",
            labels={"benchmark": "{benchmark}", "figure": "by task and model"},
        ),
        by_task_svg="results/plots/{benchmark}/by_task.svg",
        heatmap_png=report(
            "results/plots/{benchmark}/heatmap.png",
            caption="../report/heatmap.rst",
            category="Plots",
            subcategory="{benchmark}",
            labels={"benchmark": "{benchmark}", "figure": "model-by-task heatmap"},
        ),
        heatmap_svg="results/plots/{benchmark}/heatmap.svg",
    params:
        metric=CFG["leaderboard"]["metric"],
        notes=plot_notes,
    log:
        "logs/plot_leaderboard/{benchmark}.log",
    benchmark:
        "benchmarks/plot_leaderboard/{benchmark}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/plot_leaderboard.py"


rule plot_rerank_depth:
    input:
        benchmark_metric_files,
    output:
        png=report(
            "results/plots/{benchmark}/rerank_depth.png",
            caption="../report/rerank_depth.rst",
            category="Plots",
            subcategory="{benchmark}",
            labels={"benchmark": "{benchmark}", "figure": "reranking depth"},
        ),
        svg="results/plots/{benchmark}/rerank_depth.svg",
    params:
        metric=CFG["leaderboard"]["metric"],
    log:
        "logs/plot_rerank_depth/{benchmark}.log",
    benchmark:
        "benchmarks/plot_rerank_depth/{benchmark}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/plot_rerank_depth.py"


rule plot_scatter:
    input:
        unpack(scatter_inputs),
    output:
        png=report(
            "results/plots/{benchmark}/scatter.png",
            caption="../report/scatter.rst",
            category="Plots",
            subcategory="{benchmark}",
            labels={"benchmark": "{benchmark}", "figure": "per-query scatter"},
        ),
        svg="results/plots/{benchmark}/scatter.svg",
    params:
        pair=scatter_params,
    log:
        "logs/plot_scatter/{benchmark}.log",
    benchmark:
        "benchmarks/plot_scatter/{benchmark}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/plot_scatter.py"


rule plot_cliniq:
    input:
        unpack(cliniq_breakdowns),
    output:
        match_png=report(
            "results/plots/{benchmark}/cliniq_by_match_type.png",
            caption="../report/cliniq.rst",
            category="Plots",
            subcategory="{benchmark}",
            labels={"benchmark": "{benchmark}", "figure": "CliniQ by match type"},
        ),
        match_svg="results/plots/{benchmark}/cliniq_by_match_type.svg",
        query_png=report(
            "results/plots/{benchmark}/cliniq_by_query_type.png",
            caption="../report/cliniq.rst",
            category="Plots",
            subcategory="{benchmark}",
            labels={"benchmark": "{benchmark}", "figure": "CliniQ by query type"},
        ),
        query_svg="results/plots/{benchmark}/cliniq_by_query_type.svg",
    log:
        "logs/plot_cliniq/{benchmark}.log",
    benchmark:
        "benchmarks/plot_cliniq/{benchmark}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/plot_cliniq.py"


rule provenance:
    input:
        **provenance_inputs(),
    output:
        report(
            "results/provenance.json",
            caption="../report/provenance.rst",
            category="Provenance",
            labels={"file": "provenance.json"},
        ),
    params:
        config=CFG,
        repo=workflow.basedir,
    log:
        "logs/provenance/provenance.log",
    benchmark:
        "benchmarks/provenance/provenance.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/provenance.py"


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


rule report_cliniq:
    input:
        unpack(cliniq_report_inputs),
    output:
        match_csv="results/cliniq/{benchmark}/by_match_type.csv",
        match_md="results/cliniq/{benchmark}/by_match_type.md",
        query_csv="results/cliniq/{benchmark}/by_query_type.csv",
        query_md="results/cliniq/{benchmark}/by_query_type.md",
        pool="results/cliniq/{benchmark}/pool.tsv",
    wildcard_constraints:
        benchmark=cliniq_benchmark_constraint(),
    params:
        models=cliniq_models,
        depth=cliniq_pool_depth,
    log:
        "logs/report_cliniq/{benchmark}.log",
    benchmark:
        "benchmarks/report_cliniq/{benchmark}.tsv"
    conda:
        "../envs/core.yaml"
    script:
        "../scripts/report_cliniq.py"
