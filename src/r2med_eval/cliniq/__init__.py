"""CliniQ on the user's MIMIC-III copy, the MIMIC boundary in one place: the corpus rebuilt from NOTEEVENTS and
the official annotations (``corpus``), the internal files and tables (``files``), the metrics of the official
eval.py (``metrics``), the paper-shaped tables (``tables``) and figures (``plots``), and the judgment completion:
its design and estimator (``completion``), who carries a query's code in MIMIC's code tables (``codes``), the LLM
judge (``judge``), the experts' agreement and rates (``experts``) and the verdict and tables
(``completion_report``); the label files a user writes, read strictly, their messages naming ids only
(``label_files``). Note text stays owner-only under ``resources/``; what leaves holds ids and numbers.
"""
