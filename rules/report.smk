# Stage report: leaderboards, significance against the baseline, plots, provenance, the comparison with
# R2MED's published numbers, CliniQ's tables and the papers' claims tested on the runs (docs/report.md#claims), over
# every scored run. Outputs marked with report() go into `snakemake --report report.html`; captions are in
# report/*.rst.


report: "../report/workflow.rst"


rule significance:
    input:
        W.inputs.per_query_files(),
    output:
        csv=report(
            paths.fill(paths.SIGNIFICANCE, ext="csv"),
            caption="../report/significance.rst",
            category="Significance",
            labels={"table": "significance against the baseline"},
        ),
        md=paths.fill(paths.SIGNIFICANCE, ext="md"),
    log:
        paths.log_file("significance"),
    benchmark:
        paths.benchmark_file("significance")
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("significance"),
    script:
        "../scripts/significance.py"


rule leaderboard:
    input:
        **W.inputs.leaderboard(),
    output:
        csv=report(
            paths.fill(paths.LEADERBOARD, ext="csv"),
            caption="../report/leaderboard.rst",
            category="Leaderboard",
            labels={"benchmark": "all", "format": "CSV"},
        ),
        md=paths.fill(paths.LEADERBOARD, ext="md"),
        tex=paths.fill(paths.TABLE, name="leaderboard"),
        html=report(
            paths.fill(paths.LEADERBOARD, ext="html"),
            caption="../report/leaderboard.rst",
            category="Leaderboard",
            labels={"benchmark": "all", "format": "HTML"},
        ),
    log:
        paths.log_file("leaderboard"),
    benchmark:
        paths.benchmark_file("leaderboard")
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("leaderboard"),
    script:
        "../scripts/leaderboard.py"


rule leaderboard_benchmark:
    input:
        unpack(W.inputs.leaderboard_benchmark),
    output:
        csv=paths.partial(paths.BENCHMARK_LEADERBOARD, ext="csv"),
        md=paths.partial(paths.BENCHMARK_LEADERBOARD, ext="md"),
        tex=paths.fill(paths.TABLE, name="leaderboard-{benchmark}"),
        html=report(
            paths.partial(paths.BENCHMARK_LEADERBOARD, ext="html"),
            caption="../report/leaderboard.rst",
            category="Leaderboard",
            labels={"benchmark": "{benchmark}", "format": "HTML"},
        ),
    log:
        paths.log_file("leaderboard_benchmark"),
    benchmark:
        paths.benchmark_file("leaderboard_benchmark")
    wildcard_constraints:
        benchmark=W.constraint("reported_benchmark"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("leaderboard_benchmark"),
    script:
        "../scripts/leaderboard_benchmark.py"


rule plot_palette:
    output:
        update(paths.partial(paths.PALETTE)),
    log:
        paths.log_file("plot_palette"),
    benchmark:
        paths.benchmark_file("plot_palette")
    wildcard_constraints:
        benchmark=W.constraint("reported_benchmark"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("plot_palette"),
    script:
        "../scripts/plot_palette.py"


rule plot_leaderboard:
    input:
        unpack(W.inputs.benchmark_figure),
    output:
        by_task_png=report(
            paths.partial(paths.PLOT, name="by_task", ext="png"),
            caption="../report/by_task.rst",
            category="Plots",
            subcategory="{benchmark}",
            labels={"benchmark": "{benchmark}", "figure": "by task and model"},
        ),
        by_task_svg=paths.partial(paths.PLOT, name="by_task", ext="svg"),
        heatmap_png=report(
            paths.partial(paths.PLOT, name="heatmap", ext="png"),
            caption="../report/heatmap.rst",
            category="Plots",
            subcategory="{benchmark}",
            labels={"benchmark": "{benchmark}", "figure": "model-by-task heatmap"},
        ),
        heatmap_svg=paths.partial(paths.PLOT, name="heatmap", ext="svg"),
    log:
        paths.log_file("plot_leaderboard"),
    benchmark:
        paths.benchmark_file("plot_leaderboard")
    wildcard_constraints:
        benchmark=W.constraint("reported_benchmark"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("plot_leaderboard"),
    script:
        "../scripts/plot_leaderboard.py"


rule plot_rerank_depth:
    input:
        unpack(W.inputs.benchmark_figure),
    output:
        png=report(
            paths.partial(paths.PLOT, name="rerank_depth", ext="png"),
            caption="../report/rerank_depth.rst",
            category="Plots",
            subcategory="{benchmark}",
            labels={"benchmark": "{benchmark}", "figure": "reranking depth"},
        ),
        svg=paths.partial(paths.PLOT, name="rerank_depth", ext="svg"),
    log:
        paths.log_file("plot_rerank_depth"),
    benchmark:
        paths.benchmark_file("plot_rerank_depth")
    wildcard_constraints:
        benchmark=W.constraint("reported_benchmark"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("plot_rerank_depth"),
    script:
        "../scripts/plot_rerank_depth.py"


rule plot_scatter:
    input:
        unpack(W.inputs.plot_scatter),
    output:
        png=report(
            paths.partial(paths.PLOT, name="scatter", ext="png"),
            caption="../report/scatter.rst",
            category="Plots",
            subcategory="{benchmark}",
            labels={"benchmark": "{benchmark}", "figure": "per-query scatter"},
        ),
        svg=paths.partial(paths.PLOT, name="scatter", ext="svg"),
    log:
        paths.log_file("plot_scatter"),
    benchmark:
        paths.benchmark_file("plot_scatter")
    wildcard_constraints:
        benchmark=W.constraint("reported_benchmark"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("plot_scatter"),
    script:
        "../scripts/plot_scatter.py"


rule plot_cliniq:
    input:
        unpack(W.inputs.plot_cliniq),
    output:
        match_png=report(
            paths.partial(paths.PLOT, name="cliniq_by_match_type", ext="png"),
            caption="../report/cliniq.rst",
            category="Plots",
            subcategory="{benchmark}",
            labels={"benchmark": "{benchmark}", "figure": "CliniQ by match type"},
        ),
        match_svg=paths.partial(paths.PLOT, name="cliniq_by_match_type", ext="svg"),
        query_png=report(
            paths.partial(paths.PLOT, name="cliniq_by_query_type", ext="png"),
            caption="../report/cliniq.rst",
            category="Plots",
            subcategory="{benchmark}",
            labels={"benchmark": "{benchmark}", "figure": "CliniQ by query type"},
        ),
        query_svg=paths.partial(paths.PLOT, name="cliniq_by_query_type", ext="svg"),
    log:
        paths.log_file("plot_cliniq"),
    benchmark:
        paths.benchmark_file("plot_cliniq")
    wildcard_constraints:
        benchmark=W.constraint("reported_benchmark"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("plot_cliniq"),
    script:
        "../scripts/plot_cliniq.py"


rule plot_cliniq_completion:
    input:
        rescored=paths.partial(paths.COMPLETION_FILE, name="rescored", ext="csv"),
    output:
        png=report(
            paths.partial(paths.PLOT, name="cliniq_completion", ext="png"),
            caption="../report/cliniq_completion.rst",
            category="Plots",
            subcategory="{benchmark}",
            labels={"benchmark": "{benchmark}", "figure": "judgment completion"},
        ),
        svg=paths.partial(paths.PLOT, name="cliniq_completion", ext="svg"),
    log:
        paths.log_file("plot_cliniq_completion"),
    benchmark:
        paths.benchmark_file("plot_cliniq_completion")
    wildcard_constraints:
        benchmark=W.constraint("completion_benchmark"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("plot_cliniq_completion"),
    script:
        "../scripts/plot_cliniq_completion.py"


rule provenance:
    input:
        **W.inputs.provenance(),
    output:
        report(
            paths.PROVENANCE,
            caption="../report/provenance.rst",
            category="Provenance",
            labels={"file": "provenance.json"},
        ),
    log:
        paths.log_file("provenance"),
    benchmark:
        paths.benchmark_file("provenance")
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("provenance"),
    script:
        "../scripts/provenance.py"


rule r2med_vs_paper:
    input:
        metrics=W.inputs.metric_tables(),
        stats=W.inputs.stats_files(),
        variants=W.inputs.empty_hydoc_variants(),
    output:
        md=paths.R2MED_VS_PAPER,
        tex=paths.fill(paths.TABLE, name="r2med_vs_paper"),
    log:
        paths.log_file("r2med_vs_paper"),
    benchmark:
        paths.benchmark_file("r2med_vs_paper")
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("r2med_vs_paper"),
    script:
        "../scripts/r2med_vs_paper.py"


rule report_cliniq:
    input:
        unpack(W.inputs.report_cliniq),
    output:
        match_csv=paths.partial(paths.CLINIQ_TABLE, grouping="match_type", ext="csv"),
        match_md=paths.partial(paths.CLINIQ_TABLE, grouping="match_type", ext="md"),
        query_csv=paths.partial(paths.CLINIQ_TABLE, grouping="query_type", ext="csv"),
        query_md=paths.partial(paths.CLINIQ_TABLE, grouping="query_type", ext="md"),
        match_tex=paths.fill(paths.TABLE, name="cliniq-{benchmark}-by_match_type"),
        query_tex=paths.fill(paths.TABLE, name="cliniq-{benchmark}-by_query_type"),
        pool=paths.CLINIQ_POOL,
    log:
        paths.log_file("report_cliniq"),
    benchmark:
        paths.benchmark_file("report_cliniq")
    wildcard_constraints:
        benchmark=W.constraint("reported_cliniq_benchmark"),
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("report_cliniq"),
    script:
        "../scripts/report_cliniq.py"


rule claims_overlap:
    input:
        unpack(W.inputs.claims_overlap),
    output:
        paths.CLAIMS_OVERLAP,
    log:
        paths.log_file("claims_overlap"),
    benchmark:
        paths.benchmark_file("claims_overlap")
    wildcard_constraints:
        benchmark=W.constraint("r2med_benchmark"),
    conda:
        "../envs/lucene.yaml"
    resources:
        mem_mb=W.resources.light_mem_mb,
        runtime=W.resources.light_runtime,
    params:
        spec=W.params.of("claims_overlap"),
    script:
        "../scripts/claims_overlap.py"


rule claims:
    input:
        unpack(W.inputs.claims),
    output:
        json=paths.fill(paths.CLAIMS, ext="json"),
        md=report(
            paths.fill(paths.CLAIMS, ext="md"),
            caption="../report/claims.rst",
            category="Claims",
            labels={"file": "claims.md"},
        ),
        tex=paths.fill(paths.TABLE, name="claims"),
    log:
        paths.log_file("claims"),
    benchmark:
        paths.benchmark_file("claims")
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("claims"),
    script:
        "../scripts/claims.py"


rule report_index:
    input:
        W.inputs.report_index(),
    output:
        report(
            paths.INDEX_PAGE,
            caption="../report/index.rst",
            category="Index",
            labels={"page": "results/index.html"},
        ),
    log:
        paths.log_file("report_index"),
    benchmark:
        paths.benchmark_file("report_index")
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("report_index"),
    script:
        "../scripts/report_index.py"


rule mteb_export:
    input:
        metrics=W.inputs.mteb_export(),
    output:
        directory(paths.MTEB_EXPORT),
    log:
        paths.log_file("mteb_export"),
    benchmark:
        paths.benchmark_file("mteb_export")
    localrule: True
    conda:
        "../envs/core.yaml"
    params:
        spec=W.params.of("mteb_export"),
    script:
        "../scripts/mteb_export.py"
