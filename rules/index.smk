# Stage index: one Lucene index per task, shared by every BM25 configuration; bm25-paper's analysed corpus per
# task and its BM25 fitted per (k1, b), shared by every bm25-paper run of the task; dense corpus embeddings per
# (task, model), encoded in shards that can run as separate jobs, and query embeddings. A Hub model's jobs
# take its prefetch manifest as input, so the local rule prefetch_model has fetched the weights before them.


rule lucene_index:
    input:
        corpus=paths.CORPUS,
    output:
        index=directory(paths.INDEX),
        info=paths.INDEX_INFO,
    log:
        paths.log_file("lucene_index"),
    benchmark:
        paths.benchmark_file("lucene_index")
    conda:
        "../envs/lucene.yaml"
    threads: 4
    resources:
        mem_mb=W.resources.lucene_index_mem_mb,
        runtime=W.resources.lucene_index_runtime,
    params:
        spec=W.params.of("lucene_index"),
    script:
        "../scripts/lucene_index.py"


rule analyse_bm25_paper:
    input:
        corpus=paths.CORPUS,
        queries=paths.QUERIES,
    output:
        tokens=paths.BM25_PAPER_TOKENS,
        query_tokens=paths.BM25_PAPER_QUERY_TOKENS,
    log:
        paths.log_file("analyse_bm25_paper"),
    benchmark:
        paths.benchmark_file("analyse_bm25_paper")
    conda:
        "../envs/lucene.yaml"
    threads: 2
    resources:
        mem_mb=W.resources.bm25_paper_mem_mb,
        runtime=W.resources.bm25_paper_runtime,
    params:
        spec=W.params.of("analyse_bm25_paper"),
    script:
        "../scripts/analyse_bm25_paper.py"


rule fit_bm25_paper:
    input:
        unpack(W.inputs.fit_bm25_paper),
    output:
        model=paths.BM25_PAPER_FIT,
    log:
        paths.log_file("fit_bm25_paper"),
    benchmark:
        paths.benchmark_file("fit_bm25_paper")
    wildcard_constraints:
        k1=r"[0-9]+\.[0-9]+(e[-+]?[0-9]+)?",
        b=r"[0-9]+\.[0-9]+(e[-+]?[0-9]+)?",
    conda:
        "../envs/lucene.yaml"
    threads: 1
    resources:
        mem_mb=W.resources.bm25_paper_fit_mem_mb,
        runtime=W.resources.bm25_paper_fit_runtime,
    params:
        spec=W.params.of("fit_bm25_paper"),
    script:
        "../scripts/fit_bm25_paper.py"


rule encode_corpus_shard:
    input:
        unpack(W.inputs.encode_corpus_shard),
    output:
        shard=paths.EMB_SHARD,
    log:
        paths.log_file("encode_corpus_shard"),
    benchmark:
        paths.benchmark_file("encode_corpus_shard")
    wildcard_constraints:
        model=W.constraint("sharded_encoder"),
        shard=r"\d+",
        nshards=r"\d+",
    conda:
        "../envs/dense.yaml"
    threads: 4
    resources:
        mem_mb=W.resources.encoder_mem_mb,
        runtime=W.resources.encode_shard_runtime,
        gpu=W.resources.encoder_gpu,
    params:
        spec=W.params.of("encode_corpus_shard"),
    script:
        "../scripts/encode_corpus_shard.py"


rule encode_corpus:
    input:
        unpack(W.inputs.encode_corpus_shard),
    output:
        emb=paths.EMB_CORPUS,
        ids=paths.EMB_CORPUS_IDS,
        info=paths.EMB_CORPUS_INFO,
    log:
        paths.log_file("encode_corpus"),
    benchmark:
        paths.benchmark_file("encode_corpus")
    wildcard_constraints:
        model=W.constraint("whole_encoder"),
    conda:
        "../envs/dense.yaml"
    threads: 4
    resources:
        mem_mb=W.resources.encoder_mem_mb,
        runtime=W.resources.encode_corpus_runtime,
        gpu=W.resources.encoder_gpu,
    params:
        spec=W.params.of("encode_corpus"),
    script:
        "../scripts/encode_corpus.py"


rule gather_embeddings:
    input:
        corpus=paths.CORPUS,
        shards=W.inputs.embedding_shards,
    output:
        emb=paths.EMB_CORPUS,
        ids=paths.EMB_CORPUS_IDS,
        info=paths.EMB_CORPUS_INFO,
    log:
        paths.log_file("gather_embeddings"),
    benchmark:
        paths.benchmark_file("gather_embeddings")
    wildcard_constraints:
        model=W.constraint("sharded_encoder"),
    conda:
        "../envs/dense.yaml"
    resources:
        mem_mb=W.resources.light_mem_mb,
        runtime=W.resources.light_runtime,
    params:
        spec=W.params.of("gather_embeddings"),
    script:
        "../scripts/gather_embeddings.py"


rule encode_queries:
    input:
        unpack(W.inputs.encode_queries),
    output:
        emb=paths.EMB_QUERIES,
        ids=paths.EMB_QUERY_IDS,
    log:
        paths.log_file("encode_queries"),
    benchmark:
        paths.benchmark_file("encode_queries")
    wildcard_constraints:
        model=W.constraint("encoder"),
    conda:
        "../envs/dense.yaml"
    threads: 2
    resources:
        mem_mb=W.resources.encoder_mem_mb,
        runtime=W.resources.encode_queries_runtime,
        gpu=W.resources.encoder_gpu,
    params:
        spec=W.params.of("encode_queries"),
    script:
        "../scripts/encode_queries.py"


rule encode_query_variant:
    input:
        unpack(W.inputs.encode_query_variant),
    output:
        emb=paths.EMB_VARIANT,
        ids=paths.EMB_VARIANT_IDS,
    log:
        paths.log_file("encode_query_variant"),
    benchmark:
        paths.benchmark_file("encode_query_variant")
    wildcard_constraints:
        model=W.constraint("encoder"),
    conda:
        "../envs/dense.yaml"
    threads: 2
    resources:
        mem_mb=W.resources.encoder_mem_mb,
        runtime=W.resources.encode_queries_runtime,
        gpu=W.resources.encoder_gpu,
    params:
        spec=W.params.of("encode_query_variant"),
    script:
        "../scripts/encode_query_variant.py"
