"""The run registry: which benchmarks, tasks and runs a configuration selects, and how runs are named.

Run names are built and parsed here only:

* a retriever's run is the model's name;
* a query-variant (generation-augmented) run is ``<model>+<method>-<llm>``;
* a rerank run is ``<run>--<reranker>@<depth>``;
* a fusion run is its key in ``fusion``.

``Registry`` is built once per Snakemake invocation from a validated configuration; every question a rule
asks (runs of a benchmark, the job behind a derived run, the models a run comes from) is a dictionary look-up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..confidential import mimic_benchmark
from .paths import benchmark_file, bm25_float, fill

RETRIEVER_TYPES = ("bm25_lucene", "dense", "bm25_paper", "run", "python", "mteb")
ENCODER_TYPES = ("dense", "python", "mteb")  # embeddings cached, sharded and searched alike (rule retrieve_dense)
VARIANT_TYPES = ("bm25_lucene", "bm25_paper") + ENCODER_TYPES  # retrievers that can run a query variant
LLM_RERANKER_TYPES = ("llm_listwise", "llm_pointwise")  # ask an LLM server (rule llm_rerank_run)
RERANKER_TYPES = ("cross_encoder", "rankllama") + ENCODER_TYPES + LLM_RERANKER_TYPES
# document a model; they shape no run (tags: the claims; paper_name, published_as: the published rows compared)
DOC_KEYS = ("description", "enabled", "paper_name", "published_as", "tags")

_RERANK = re.compile(r"^(?P<run>.+)--(?P<reranker>[^@]+)@(?P<depth>\d+)$")


def variant_name(model: str, method: str, llm: str) -> str:
    return f"{model}+{method}-{llm}"


def rerank_name(run: str, reranker: str, depth: int) -> str:
    return f"{run}--{reranker}@{depth}"


def parse_rerank_name(name: str) -> dict | None:
    """{run, reranker, depth} of a name built by rerank_name; None for any other name. Prefer the registry's
    lineage (``Registry.derived``): a model name may itself contain ``--``."""
    m = _RERANK.match(name)
    return {"run": m["run"], "reranker": m["reranker"], "depth": int(m["depth"])} if m else None


def all_variant_names(cfg: dict) -> dict[str, dict]:
    """Every configured query-variant run, selected or not: name -> {model, method, llm, benchmark}."""
    return {variant_name(m, v["method"], v["llm"]): {"model": m, "method": v["method"], "llm": v["llm"],
                                                     "benchmark": v["benchmark"]}
            for v in cfg["query_variants"] for m in v["models"]}


def derived_jobs(cfg: dict) -> dict[str, dict]:
    """Every configured derived run, selected or not, in configuration order: name -> lineage."""
    out: dict[str, dict] = {}
    for job in cfg["rerank"]:
        for depth in job["depths"]:
            out[rerank_name(job["run"], job["reranker"], depth)] = {
                "kind": "rerank", "run": job["run"], "reranker": job["reranker"], "depth": depth}
    for name, spec in cfg["fusion"].items():
        out[name] = {"kind": "fusion", **spec}
    return out


def job_inputs(job: dict) -> list[str]:
    return [job["run"]] if job["kind"] == "rerank" else list(job["runs"])


def run_file(pattern: str, benchmark: str, task: str) -> str:
    """A ``type: run`` model's path pattern filled for one task ({benchmark}, {task}; no other placeholder)."""
    return pattern.replace("{benchmark}", benchmark).replace("{task}", task)


def strip_doc_keys(spec: dict) -> dict:
    return {k: v for k, v in spec.items() if k not in DOC_KEYS}


@dataclass
class Registry:
    cfg: dict
    benchmarks: list[str] = field(init=False)
    tasks: list[tuple[str, str]] = field(init=False)
    selected: set[str] = field(init=False)
    retrievers: list[str] = field(init=False)
    variants: dict[str, dict] = field(init=False)
    derived: dict[str, dict] = field(init=False)
    skipped: list[str] = field(init=False)

    def __post_init__(self):
        cfg = self.cfg
        self.models = cfg["models"]
        self.benchmarks = list(cfg.get("benchmarks_to_run") or cfg["benchmarks"])
        self.tasks = [(b, t) for b in self.benchmarks for t in cfg["benchmarks"][b]["tasks"]]
        explicit = cfg.get("models_to_run")
        order = list(explicit) if explicit else [m for m, s in self.models.items() if s["enabled"]]
        self.selected = set(order)
        self.retrievers = [m for m in order if self.models[m]["type"] in RETRIEVER_TYPES]
        chosen = set(self.retrievers)
        self.variants = {n: v for n, v in all_variant_names(cfg).items() if v["model"] in chosen}
        self.all_derived = derived_jobs(cfg)
        kept = self._close(chosen | set(self.variants))
        self.derived = {n: j for n, j in self.all_derived.items() if n in kept}
        self.skipped = [n for n in self.all_derived if n not in kept]
        self.all_runs = self.retrievers + list(self.variants) + list(self.derived)
        self._runs_of: dict[str, list[str]] = {}
        self._claims: dict[str, dict] | None = None

    def _close(self, available: set[str]) -> set[str]:
        """Derived runs whose inputs are available (and whose reranker is selected), to a fixed point."""
        kept: set[str] = set()
        pending = [n for n, j in self.all_derived.items()
                   if j["kind"] != "rerank" or j["reranker"] in self.selected]
        changed = True
        while changed and pending:
            changed = False
            rest = []
            for name in pending:
                if all(r in available or r in kept for r in job_inputs(self.all_derived[name])):
                    kept.add(name)
                    changed = True
                else:
                    rest.append(name)
            pending = rest
        return kept

    # ------------------------------------------------------------ questions rules ask

    @property
    def rerank_jobs(self) -> dict[str, dict]:
        return {n: j for n, j in self.derived.items() if j["kind"] == "rerank"}

    def llm_reranked(self, run: str) -> bool:
        """A rerank run whose reranker asks an LLM server (rule llm_rerank_run, not rerank_run)."""
        job = self.derived.get(run)
        return bool(job) and job["kind"] == "rerank" and self.models[job["reranker"]]["type"] in LLM_RERANKER_TYPES

    @property
    def fusion_jobs(self) -> dict[str, dict]:
        return {n: j for n, j in self.derived.items() if j["kind"] == "fusion"}

    def runs_of(self, benchmark: str) -> list[str]:
        """Runs that exist on one benchmark: retrievers, its query-variant runs, derived runs whose inputs exist."""
        if benchmark not in self._runs_of:
            variants = [n for n, v in self.variants.items() if v["benchmark"] == benchmark]
            base = set(self.retrievers) | set(variants)
            kept = self._close(base) & set(self.derived)
            self._runs_of[benchmark] = self.retrievers + variants + [n for n in self.derived if n in kept]
        return self._runs_of[benchmark]

    def complete(self, benchmark: str) -> bool:
        """Whether this configuration scores every run it defines on ``benchmark`` (``models_to_run`` leaves none of
        them out): a complete scoring, whose collected metrics stand for the benchmark in the report."""
        if not self.cfg.get("models_to_run"):
            return True
        every = Registry({**self.cfg, "models_to_run": None, "benchmarks_to_run": [benchmark]})
        return set(every.runs_of(benchmark)) <= set(self.runs_of(benchmark))

    def selection(self, benchmark: str) -> dict:
        """What a scoring of ``benchmark`` selects: complete or not, its runs, the ``models_to_run`` that chose
        them (rule collect_metrics records it beside the collected metrics)."""
        return {"benchmark": benchmark, "complete": self.complete(benchmark), "runs": self.runs_of(benchmark),
                "models_to_run": list(self.cfg.get("models_to_run") or []) or None}

    def run_tasks(self):
        """(benchmark, task, run) of every run that is scored."""
        return [(b, t, r) for b, t in self.tasks for r in self.runs_of(b)]

    def model_of(self, run: str) -> str:
        """The retriever behind a first-stage run (a query-variant run's model)."""
        return self.variants[run]["model"] if run in self.variants else run

    def retriever_runs(self, *mtypes: str) -> list[str]:
        """First-stage run names of the given retriever types, query-variant runs included."""
        return [r for r in self.retrievers + list(self.variants) if self.models[self.model_of(r)]["type"] in mtypes]

    def cliniq_tie_order(self, benchmark: str, run: str) -> str:
        """How equal scores of a run on a CliniQ benchmark are ranked when it is scored: the benchmark's
        ``tie_order``; ``evalpy`` (the default) means eval.py's own order for the runs searched over cached
        embeddings (rule retrieve_dense writes them in that order) and the corpus order for every other run."""
        order = self.cfg["benchmarks"][benchmark]["tie_order"]
        if order != "evalpy":
            return order
        searched = run in self.retriever_runs(*ENCODER_TYPES)
        return "evalpy" if searched else "corpus"

    def encoders(self) -> list[str]:
        """Models whose embeddings are needed (dense, python, mteb): retrievers and dense re-scorers."""
        names = [m for m in self.retrievers if self.models[m]["type"] in ENCODER_TYPES]
        names += [j["reranker"] for j in self.rerank_jobs.values()
                  if self.models[j["reranker"]]["type"] in ENCODER_TYPES]
        return list(dict.fromkeys(names))

    def hub_models(self) -> list[str]:
        """Selected models whose weights come from the Hugging Face Hub (source, query_source or base_source ``hf``):
        the retrievers and the rerankers of selected rerank jobs. Rule prefetch_model fetches them ahead of the jobs."""
        names = self.retrievers + [j["reranker"] for j in self.rerank_jobs.values()]
        return [m for m in dict.fromkeys(names) if self.is_hub_model(m)]

    def is_hub_model(self, model: str) -> bool:
        from ..hub.models import hub_sources

        return bool(hub_sources(self.models[model]))

    def root_types(self, run: str, seen: tuple = ()) -> set[str]:
        """Types of the first-stage retrievers a run comes from (through reranking and fusion)."""
        if run in self.models or run in self.variants:
            return {self.models[self.model_of(run)]["type"]}
        job = self.all_derived.get(run)
        if job is None or run in seen:
            return set()
        return set().union(*(self.root_types(r, seen + (run,)) for r in job_inputs(job)))

    def protocol_of(self, run: str, seen: tuple = ()) -> str | None:
        """The evaluation protocol a run is made under (``benchmarks.protocols``): its retriever's ``protocol``; a
        derived run's when every first-stage run it comes from has the same one; None otherwise."""
        if run in self.models or run in self.variants:
            return self.models[self.model_of(run)].get("protocol")
        job = self.all_derived.get(run)
        if job is None or run in seen:
            return None
        found = {self.protocol_of(r, seen + (run,)) for r in job_inputs(job)}
        return found.pop() if len(found) == 1 else None

    def train_qrels(self, run: str, benchmark: str, task: str) -> list[str]:
        """A learned fusion's training judgments (its ``optimize.train_qrels`` filled for the task); none for a run
        that is not one."""
        job = self.derived.get(run)
        if not job or job["kind"] != "fusion" or not job.get("optimize"):
            return []
        return [run_file(job["optimize"]["train_qrels"], benchmark, task)]

    def run_file(self, model: str, benchmark: str, task: str) -> str:
        """The user's run file of a ``type: run`` model for one task (its path pattern filled)."""
        return run_file(self.models[model]["path"], benchmark, task)

    def is_cliniq(self, benchmark: str) -> bool:
        return self.cfg["benchmarks"][benchmark]["layout"] == "cliniq"

    def is_private(self, benchmark: str) -> bool:
        """MIMIC-derived (a CliniQ benchmark): its note text, and every file that may quote it, is owner-only and
        stays under resources/ (``paths.PRIVATE``). One definition with the jobs' own:
        ``confidential.mimic_benchmark``."""
        return mimic_benchmark(self.cfg, benchmark)

    @property
    def cliniq_benchmarks(self) -> list[str]:
        return [b for b in self.benchmarks if self.is_cliniq(b)]

    def cliniq_task(self, benchmark: str) -> str:
        return next(iter(self.cfg["benchmarks"][benchmark]["tasks"]))

    @property
    def completion(self) -> dict | None:
        """The ``cliniq_completion`` block (defaults filled), or None when the judgment completion is off."""
        return self.cfg.get("cliniq_completion")

    def completion_benchmark(self) -> list[str]:
        """The benchmark whose judgments are completed, as a list (empty when off)."""
        return [self.completion["benchmark"]] if self.completion else []

    def completion_runs(self) -> list[str]:
        """The runs whose top ``pool_depth`` form the pool and that are re-scored: ``runs``, else every run of the
        benchmark."""
        if not self.completion:
            return []
        return list(self.completion.get("runs") or self.runs_of(self.completion["benchmark"]))

    def synthetic(self, benchmarks=None) -> list[str]:
        """The synthetic benchmarks (``synthetic: true``) among ``benchmarks`` (default: the selected ones)."""
        names = self.benchmarks if benchmarks is None else benchmarks
        return [b for b in names if (self.cfg["benchmarks"].get(b) or {}).get("synthetic")]

    def completion_experts(self) -> tuple[list[str], list[str]]:
        """The experts' files of the completion: (those the estimates read, those expected but missing). With
        ``human_labels_missing: report`` a file that does not exist (yet) is left out and named as missing; with
        ``stop`` the configuration check has made sure every file exists."""
        from pathlib import Path

        files = list(self.completion.get("human_labels") or ()) if self.completion else []
        if self.completion and self.completion.get("human_labels_missing") == "report":
            present = [f for f in files if Path(f).expanduser().is_file()]
            return present, [f for f in files if f not in present]
        return files, []

    def completion_families(self) -> dict[str, str | None]:
        """The family of each re-scored run for the review's rule (BM25's recall advantage over the best dense run):
        lexical or dense for a first-stage retriever on the plain queries (``family``), None for any other run."""
        return {r: self.family(r) if r in self.models and r not in self.variants and r not in self.derived else None
                for r in self.completion_runs()}

    def completion_pool_runs(self) -> list[str]:
        """The runs whose top chunks form the pool: the completion's runs, none with ``pool_depth: 0`` (the review's
        sample-only design, which reads no run before the re-scoring)."""
        return self.completion_runs() if self.completion and self.completion["pool_depth"] else []

    def completion_code_tables(self) -> dict:
        """MIMIC-III's code tables beside the completed benchmark's NOTEEVENTS (name -> path or None;
        ``cliniq.codes.table_files``)."""
        from ..cliniq.codes import table_files

        return table_files(self.cfg["benchmarks"][self.completion["benchmark"]]["noteevents"])

    def completion_coded_from(self) -> str:
        """Where coded admissions come from: ``codes`` or ``judgments``; ``auto``: codes when every table is there."""
        setting = self.completion["coded_from"]
        if setting != "auto":
            return setting
        return "codes" if all(self.completion_code_tables().values()) else "judgments"

    def source_tasks(self) -> list[tuple[str, str]]:
        return [(b, t) for b, t in self.tasks if "source" in self.cfg["benchmarks"][b]["tasks"][t]]

    def report_baseline(self) -> str | None:
        """The configured baseline, else the first selected run."""
        return self.cfg["report"].get("baseline") or (self.all_runs[0] if self.all_runs else None)

    def report_scatter(self) -> list[str]:
        """The two runs of the per-query scatter (configured, else the first two runs); [] when either is not run."""
        pair = self.cfg["report"].get("scatter") or self.all_runs[:2]
        return list(pair) if len(pair) == 2 and all(r in self.all_runs for r in pair) else []

    def scatter_runs(self, benchmark: str) -> list[str]:
        pair = self.report_scatter()
        return pair if pair and all(r in self.runs_of(benchmark) for r in pair) else []

    def rerank_lineage(self, benchmark: str) -> dict[str, dict]:
        """Rerank runs of a benchmark: name -> {run, reranker, depth}."""
        return {n: {k: j[k] for k in ("run", "reranker", "depth")} for n, j in self.rerank_jobs.items()
                if n in self.runs_of(benchmark)}

    # ------------------------------------------------------------ the claims (docs/report.md#claims)

    def family(self, model: str) -> str | None:
        """A model's family for the claims: its ``tags.family``, else lexical (BM25) or dense (an encoder) by type."""
        spec = self.models[model]
        given = (spec.get("tags") or {}).get("family")
        if given:
            return given
        return "lexical" if spec["type"] in ("bm25_lucene", "bm25_paper") else \
            "dense" if spec["type"] in ENCODER_TYPES else None

    def llm_kind(self, llm: str) -> str:
        """Who wrote an LLM's expansions, for the claims: its ``tags.kind``, else reasoning when its reasoning format
        writes a trace before the answer (think, huatuo-o1, sky-t1), else non-reasoning."""
        given = (self.llm(llm).get("tags") or {}).get("kind")
        if given:
            return given
        return "reasoning" if self.reasoning(llm) in ("think", "huatuo-o1", "sky-t1") else "non-reasoning"

    def claim_description(self, benchmark: str) -> dict | None:
        """What the claims know of a benchmark's runs (``claims.roles``: kind, lineage, tags); None for a benchmark
        no claim is about."""
        from ..claims.catalogue import benchmark_kind

        kind = benchmark_kind(self.cfg["benchmarks"][benchmark]["layout"])
        if kind is None:
            return None
        runs: dict[str, dict] = {}
        for run in self.runs_of(benchmark):
            if run in self.variants:
                v = self.variants[run]
                runs[run] = {"kind": "variant", "model": v["model"], "method": v["method"], "llm": v["llm"],
                             "llm_kind": self.llm_kind(v["llm"]), "family": self.family(v["model"])}
            elif run in self.derived:
                job = self.derived[run]
                runs[run] = ({"kind": "rerank", "input": job["run"], "reranker": job["reranker"], "depth": job["depth"]}
                             if job["kind"] == "rerank" else
                             {"kind": "fusion", "method": job["method"], "inputs": list(job["runs"])})
            else:
                tags = self.models[run].get("tags") or {}
                runs[run] = {"kind": "retriever", "family": self.family(run), "domain": tags.get("domain"),
                             "parameters": tags.get("parameters")}
        return {"kind": kind, "completion": benchmark in self.completion_benchmark(), "runs": runs}

    def claims(self) -> dict[str, dict]:
        """Per benchmark a claim is about: {kind, tasks, claims: each claim's roles (``claims.roles.select``)}."""
        if self._claims is None:
            from ..claims.roles import select

            self._claims = {}
            for b in self.benchmarks:
                desc = self.claim_description(b)
                if desc is not None:
                    self._claims[b] = {"kind": desc["kind"], "tasks": [t for bb, t in self.tasks if bb == b],
                                       "claims": select(desc)}
        return self._claims

    # ------------------------------------------------------------ lineage

    def branch(self, benchmark: str, task: str, run: str) -> dict:
        """The configuration a run depends on: {"task": ..., "runs": {name: lineage}, "models": {name: entry}},
        documentation keys (description, enabled, paper_name) left out."""
        runs: dict = {}
        models: dict = {}

        def visit(name):
            if name in runs:
                return
            if name in self.all_derived:
                job = self.all_derived[name]
                runs[name] = job
                if job["kind"] == "rerank":
                    models[job["reranker"]] = strip_doc_keys(self.models[job["reranker"]])
                for r in job_inputs(job):
                    visit(r)
            elif name in self.variants:
                runs[name] = {"kind": "query_variant", **self.variants[name]}
                models[self.model_of(name)] = strip_doc_keys(self.models[self.model_of(name)])
            else:
                runs[name] = {"kind": "retriever", "model": name}
                models[name] = strip_doc_keys(self.models[name])

        visit(run)
        return {"task": self.task_entry(benchmark, task), "runs": runs, "models": models}

    def task_entry(self, benchmark: str, task: str) -> dict:
        bench = self.cfg["benchmarks"][benchmark]
        return {**{k: v for k, v in bench.items() if k != "tasks"}, "task": task, **bench["tasks"][task]}

    def llm(self, name: str) -> dict:
        """An LLM's ``llms`` entry with the schema defaults (an LLM not listed takes them all)."""
        from .schema import with_defaults

        return with_defaults("llm", self.cfg.get("llms", {}).get(name, {}))

    def reasoning(self, llm: str) -> str:
        """How an LLM's output is cut to its answer (``llm.reasoning.REASONING_FORMATS``)."""
        from ..llm.reasoning import reasoning_format

        return reasoning_format(llm, self.llm(llm)["reasoning"])

    def generated(self, llm: str) -> bool:
        """Whether the pipeline writes this LLM's expansion files itself (``llms.<llm>.generate``)."""
        return "generate" in self.llm(llm)

    def prompt_task(self, benchmark: str, task: str, method: str, llm: str) -> str:
        """The R2MED task whose generation prompt a (benchmark, task, method, llm) expansion uses."""
        from ..benchmarks.r2med import paper_task

        for v in self.cfg["query_variants"]:
            if (v["benchmark"], v["method"], v["llm"]) == (benchmark, method, llm) and v.get("prompt_task"):
                return v["prompt_task"]
        return paper_task(self.cfg["benchmarks"][benchmark]["tasks"][task]) or task

    def generated_variants(self) -> list[dict]:
        """{benchmark, task, method, llm} of every selected expansion file the pipeline generates."""
        out = {}
        for v in self.variants.values():
            if self.generated(v["llm"]):
                for b, t in self.tasks:
                    if b == v["benchmark"]:
                        out[(b, t, v["method"], v["llm"])] = {"benchmark": b, "task": t, "method": v["method"],
                                                              "llm": v["llm"]}
        return list(out.values())

    def gar_differences(self, variant: dict) -> list[str]:
        """Why a query-variant run is not R2MED's setting of the same (model, method, llm) row: empty when it is."""
        from ..expansion.gar import R2MED_HYDOC_AVERAGE, R2MED_HYDOC_PROMPT
        from ..llm.reasoning import reasoning_format

        out = []
        llm, model = variant["llm"], self.models[variant["model"]]
        ours, theirs = self.reasoning(llm), reasoning_format(llm)
        if ours != theirs:
            out.append(f"the LLM's output is cut with reasoning format {ours!r}; R2MED's code uses {theirs!r} "
                       f"for {llm}")
        if self.generated(llm):
            out.append("the expansions were generated by this pipeline, not R2MED's published files")
        if model["type"] == "dense":
            want = R2MED_HYDOC_PROMPT.get(model.get("paper_name"), "none")
            if model["hydoc_prompt"] != want:
                out.append(f"the hypothetical document is encoded with hydoc_prompt {model['hydoc_prompt']!r}; "
                           f"R2MED's {model.get('paper_name')} wrapper uses {want!r}")
            want = R2MED_HYDOC_AVERAGE.get(model.get("paper_name"), "normalized")
            if model["hydoc_average"] != want:
                out.append(f"the query's and the hypothetical document's vectors are averaged {model['hydoc_average']}"
                           f"; R2MED's {model.get('paper_name')} wrapper averages them {want}")
        return out

    def empty_hydoc_runs(self) -> dict[str, dict]:
        """Query-variant runs of a dense model named after an R2MED retriever whose encode gives NaN for an empty
        hypothetical document (``gar.R2MED_EMPTY_HYDOC_NAN``, GritLM), on a selected benchmark:
        run -> {benchmark, method, llm, reasoning}. Their paper comparison counts the empty documents."""
        from ..expansion.gar import R2MED_EMPTY_HYDOC_NAN

        return {run: {"benchmark": v["benchmark"], "method": v["method"], "llm": v["llm"],
                      "reasoning": self.reasoning(v["llm"])}
                for run, v in self.variants.items()
                if v["benchmark"] in self.benchmarks and self.models[v["model"]]["type"] == "dense"
                and self.models[v["model"]].get("paper_name") in R2MED_EMPTY_HYDOC_NAN}

    def paper_key(self, run: str) -> dict:
        """{key: the row of R2MED's published table a run is compared with (without the task), or None;
        type: our model type; protocol: the run's (``protocol_of``); published_as: the rows of the other published
        sources its model (a rerank run: its reranker) names (``report.r2med_paper.SOURCES``); a rerank run's
        first_stage: {run, type, paper_name, depth}, which the report names and a published row may require}."""
        models = self.models

        def name(m):
            return models[m].get("paper_name") if m in models else None

        key, mtype, first, published = None, None, None, models[run].get("published_as") if run in models else None
        if run in models:
            mtype = models[run]["type"]
            if name(run):
                key = ("retriever", name(run), "-", "-", "-", "-")
        elif run in self.variants:
            v = self.variants[run]
            mtype = models[v["model"]]["type"]
            if name(v["model"]):
                key = ("gar", name(v["model"]), "-", "-", v["method"], v["llm"])
                differs = self.gar_differences(v)
                if differs:
                    return {"key": None, "type": mtype, "not_compared": "; ".join(differs),
                            "protocol": self.protocol_of(run)}
        elif run in self.derived and self.derived[run]["kind"] == "rerank":
            job = self.derived[run]
            mtype = models[job["reranker"]]["type"]
            kind = models[job["run"]]["type"] if job["run"] in models else (
                "query variant" if job["run"] in self.variants else "derived")
            first = {"run": job["run"], "type": kind, "paper_name": name(job["run"]), "depth": job["depth"]}
            published = models[job["reranker"]].get("published_as")
            if job["run"] in models and name(job["run"]) and name(job["reranker"]):
                key = ("reranker", name(job["run"]), name(job["reranker"]), str(job["depth"]), "-", "-")
        elif run in self.derived:
            mtype = "fusion"
        out = {"key": list(key) if key else None, "type": mtype, "protocol": self.protocol_of(run)}
        if published:  # the rows of the other published sources
            out["published_as"] = dict(published)
        if first:
            out["first_stage"] = first
        return out


def job_benchmark_files(reg: Registry, benchmark: str, task: str, run: str) -> list[tuple[str, str]]:
    """(rule, benchmark file) of every job in a run's branch, shared jobs (task preparation, the Lucene
    index, corpus encoding) included."""
    cfg = reg.cfg
    w = {"benchmark": benchmark, "task": task}

    def bench(rule, **more):
        return rule, fill(benchmark_file(rule), **w, **more)

    out = [bench("prepare_task")]

    def encoder(model):
        n = cfg["models"][model]["shards"]
        if n == 1:
            return [bench("encode_corpus", model=model)]
        return [bench("encode_corpus_shard", model=model, shard=i, nshards=n) for i in range(1, n + 1)] + [
            bench("gather_embeddings", model=model)]

    for name, job in reg.branch(benchmark, task, run)["runs"].items():
        kind = job["kind"]
        if kind in ("retriever", "query_variant"):
            model = job["model"]
            mtype = cfg["models"][model]["type"]
            if mtype == "bm25_lucene":
                out += [bench("lucene_index"), bench("retrieve_bm25_lucene", model=name)]
            elif mtype == "bm25_paper":
                spec = cfg["models"][model]
                out += [bench("analyse_bm25_paper"),
                        bench("fit_bm25_paper", k1=bm25_float(spec["k1"]), b=bm25_float(spec["b"])),
                        bench("retrieve_bm25_paper", model=name)]
            elif mtype == "run":
                out.append(bench("import_run", model=name))
            else:
                out += encoder(model)
                if kind == "retriever":
                    out.append(bench("encode_queries", model=model))
                else:
                    out.append(bench("encode_query_variant", model=model, method=job["method"], llm=job["llm"]))
                out.append(bench("retrieve_dense", model=name))
            if kind == "query_variant":
                rule = "prepare_private_query_variant" if reg.is_private(benchmark) else "prepare_query_variant"
                out.append(bench(rule, method=job["method"], llm=job["llm"]))
                if reg.generated(job["llm"]):
                    out.append(bench("generate_query_variant", method=job["method"], llm=job["llm"]))
        elif kind == "rerank":
            if cfg["models"][job["reranker"]]["type"] in ENCODER_TYPES:
                out += encoder(job["reranker"]) + [bench("encode_queries", model=job["reranker"])]
            out.append(bench("llm_rerank_run" if reg.llm_reranked(name) else "rerank_run", model=name))
        else:
            out.append(bench("fuse_runs", model=name))
    out.append(bench("score_run", model=run))
    return list(dict.fromkeys(out))
