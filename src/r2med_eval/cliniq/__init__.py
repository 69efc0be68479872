"""CliniQ on the user's MIMIC-III copy, the MIMIC boundary in one place: the corpus rebuilt from NOTEEVENTS and
the official annotations (``corpus``), the internal files and tables (``files``), the metrics of the official
eval.py (``metrics``), the paper-shaped tables (``tables``) and figures (``plots``), and the judgment completion:
its design and estimator (``completion``), the LLM judge (``judge``) and the verdict and tables
(``completion_report``). Note text stays owner-only under ``resources/``; what leaves holds ids and numbers.
"""
