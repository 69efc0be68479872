# Stage: encode (part of index). Dense corpus embeddings per (task, model), sharded; query embeddings.


rule encode_corpus_shard:
    input:
        corpus="results/data/{benchmark}/{task}/corpus.jsonl",
    output:
        shard="results/embeddings/{benchmark}/{task}/{model}/shards/{shard}-of-{nshards}.npz",
    wildcard_constraints:
        model=constraint_models("dense"),
        shard=r"\d+",
        nshards=r"\d+",
    params:
        model=encoder_spec,
    threads: 4
    resources:
        mem_mb=encoder_mem_mb,
        runtime=encode_shard_runtime,
        gpu=gpu_count,
    log:
        "logs/encode_corpus_shard/{benchmark}/{task}/{model}/{shard}-of-{nshards}.log",
    benchmark:
        "benchmarks/encode_corpus_shard/{benchmark}/{task}/{model}/{shard}-of-{nshards}.tsv"
    conda:
        "../envs/dense.yaml"
    script:
        "../scripts/encode_corpus_shard.py"


rule gather_embeddings:
    input:
        corpus="results/data/{benchmark}/{task}/corpus.jsonl",
        shards=embedding_shards,
    output:
        emb="results/embeddings/{benchmark}/{task}/{model}/corpus.npy",
        ids="results/embeddings/{benchmark}/{task}/{model}/corpus_ids.txt",
    wildcard_constraints:
        model=constraint_models("dense"),
    params:
        storage=embedding_storage,
    resources:
        mem_mb=gather_mem_mb,
        runtime=light_runtime,
    log:
        "logs/gather_embeddings/{benchmark}/{task}/{model}.log",
    benchmark:
        "benchmarks/gather_embeddings/{benchmark}/{task}/{model}.tsv"
    conda:
        "../envs/dense.yaml"
    script:
        "../scripts/gather_embeddings.py"


rule encode_queries:
    input:
        queries="results/data/{benchmark}/{task}/queries.jsonl",
    output:
        emb="results/embeddings/{benchmark}/{task}/{model}/queries.npy",
        ids="results/embeddings/{benchmark}/{task}/{model}/queries_ids.txt",
    wildcard_constraints:
        model=constraint_models("dense"),
    params:
        model=encoder_spec,
    threads: 2
    resources:
        mem_mb=encoder_mem_mb,
        runtime=encode_queries_runtime,
        gpu=gpu_count,
    log:
        "logs/encode_queries/{benchmark}/{task}/{model}.log",
    benchmark:
        "benchmarks/encode_queries/{benchmark}/{task}/{model}.tsv"
    conda:
        "../envs/dense.yaml"
    script:
        "../scripts/encode_queries.py"


rule encode_query_variant:
    input:
        queries="results/data/{benchmark}/{task}/queries.jsonl",
        variant="results/data/{benchmark}/{task}/variants/{method}--{llm}.jsonl",
    output:
        emb="results/embeddings/{benchmark}/{task}/{model}/variants/{method}--{llm}.npy",
        ids="results/embeddings/{benchmark}/{task}/{model}/variants/{method}--{llm}_ids.txt",
    wildcard_constraints:
        model=constraint_models("dense"),
        method="hyde|query2doc|lamer",
        llm=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    params:
        model=encoder_spec,
    threads: 2
    resources:
        mem_mb=encoder_mem_mb,
        runtime=encode_queries_runtime,
        gpu=gpu_count,
    log:
        "logs/encode_query_variant/{benchmark}/{task}/{model}/{method}--{llm}.log",
    benchmark:
        "benchmarks/encode_query_variant/{benchmark}/{task}/{model}/{method}--{llm}.tsv"
    conda:
        "../envs/dense.yaml"
    script:
        "../scripts/encode_query_variant.py"
