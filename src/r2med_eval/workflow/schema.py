"""The configuration schema (``schemas/config.schema.yaml``) and its defaults, filled at every depth.

Defaults live in the schema alone: ``fill_defaults`` writes them into a configuration (model entries by type,
nested objects, the ``oneOf`` branch an entry matches, ``if``/``then`` branches), ``with_defaults`` into one
registry entry, ``schema_default``/``cliniq_default`` read a single one; ``schema_errors`` stops with one message
naming the key where a configuration does not match. The other checks are ``workflow.config``'s;
the registry reads entries' defaults from here, so neither imports the other in a loop.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from ..bounds import key_path, shown
from ..errors import ConfigError, did_you_mean, name_list

SCHEMA_PATH = Path(__file__).resolve().parents[3] / "schemas" / "config.schema.yaml"


_SCHEMAS: dict[str, dict] = {}


def _load_schema(path: str, cache=None) -> dict:
    """The schema at ``path``, read once per process; with a planning cache (``workflow.cache``) the parsed schema
    is stored as JSON under the sha256 of the file's bytes (reading JSON is about 30 times faster than YAML)."""
    if path not in _SCHEMAS:
        from .cache import key_of, plain

        data = Path(path).read_bytes()
        key = key_of("schema", data) if cache is not None else None
        schema = cache.get("schema", key) if key else None
        if not isinstance(schema, dict):
            schema = yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml when present
            if key and plain(schema):
                cache.put("schema", key, schema)
        _SCHEMAS[path] = schema
    return _SCHEMAS[path]


def load_schema(path=SCHEMA_PATH) -> dict:
    return copy.deepcopy(_load_schema(str(path)))


def _resolve(node: dict, root: dict) -> dict:
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        target = root
        for part in ref.lstrip("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


_VALIDATORS: dict[tuple[int, int], object] = {}


def _is_valid(instance, schema: dict, root: dict) -> bool:
    """``instance`` against a subschema (its $refs resolved in ``root``); one validator per subschema."""
    import jsonschema

    key = (id(schema), id(root))
    if key not in _VALIDATORS:
        _VALIDATORS[key] = (jsonschema.Draft202012Validator({**schema, "$defs": root.get("$defs", {})}), schema, root)
    return _VALIDATORS[key][0].is_valid(instance)


def fill_defaults(instance, schema: dict, root: dict):
    """Fill ``default`` values of ``schema`` into ``instance`` (in place), recursing through properties,
    additionalProperties, items, $ref, allOf/if-then and the oneOf branch the instance matches."""
    schema = _resolve(schema, root)
    if not isinstance(schema, dict):
        return instance
    for sub in schema.get("allOf", []):
        sub = _resolve(sub, root)
        if "if" in sub:
            branch = sub.get("then") if _is_valid(instance, sub["if"], root) else sub.get("else")
            if branch is not None:
                fill_defaults(instance, branch, root)
        else:
            fill_defaults(instance, sub, root)
    for key in ("oneOf", "anyOf"):
        for sub in schema.get(key, []):
            if _is_valid(instance, _resolve(sub, root), root):
                fill_defaults(instance, sub, root)
                break
    if isinstance(instance, dict):
        props = schema.get("properties", {})
        for key, prop in props.items():
            prop = _resolve(prop, root)
            if key not in instance and isinstance(prop, dict) and "default" in prop:
                instance[key] = copy.deepcopy(prop["default"])
            if key in instance:
                fill_defaults(instance[key], prop, root)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in instance:
                if key not in props:
                    fill_defaults(instance[key], extra, root)
    elif isinstance(instance, list) and isinstance(schema.get("items"), dict):
        for item in instance:
            fill_defaults(item, schema["items"], root)
    return instance


def with_defaults(definition: str, obj: dict, schema: dict | None = None) -> dict:
    """A copy of ``obj`` with the defaults of ``$defs/<definition>`` (e.g. a model type) filled in."""
    schema = schema or _load_schema(str(SCHEMA_PATH))
    return fill_defaults(copy.deepcopy(obj), schema["$defs"][definition], schema)


def schema_default(*path: str, schema: dict | None = None):
    """The default written in the schema at ``$defs`` path, e.g. ``schema_default('dense', 'max_length')``."""
    schema = schema or _load_schema(str(SCHEMA_PATH))
    node = schema["$defs"][path[0]]
    for part in path[1:]:
        node = _resolve(node, schema)["properties"][part]
    return copy.deepcopy(node["default"])


def cliniq_default(*path: str):
    """A CliniQ default (filled only for layout: cliniq), e.g. ``cliniq_default('annotations', 'commit')``."""
    schema = _load_schema(str(SCHEMA_PATH))
    node = schema["$defs"]["benchmark"]["allOf"][0]["then"]
    for part in path:
        node = node["properties"][part]
    return copy.deepcopy(node["default"])


# ---------------------------------------------------------------- messages

FIX = "see schemas/config.schema.yaml and docs/configuration.md."

# the phrase of a JSON Schema bound, with the bound's value
_BOUNDS = {"minimum": "is less than {}", "maximum": "is more than {}", "exclusiveMinimum": "must be more than {}",
           "exclusiveMaximum": "must be less than {}", "minLength": "is shorter than {} characters",
           "maxLength": "is longer than {} characters", "minItems": "has fewer than {} items",
           "maxItems": "has more than {} items", "minProperties": "has fewer than {} keys"}


def error_message(error) -> str:
    """One sentence naming the key; a value is shown cut to a few hundred characters (``bounds.shown``), never
    through JSON Schema's own message, which renders the whole value."""
    where = key_path(error.absolute_path)
    v = error.validator
    value = shown(error.instance)
    if v == "additionalProperties":
        extra = sorted((k for k in error.instance if k not in error.schema.get("properties", {})), key=str)
        key = key_path(list(error.absolute_path) + [extra[0]]) if extra else where
        allowed = sorted(error.schema.get("properties", {}))
        hint = did_you_mean(extra[0], allowed) if extra else ""
        return f"unknown key {shown(key)}{'; ' + hint if hint else ''} (allowed here: {name_list(allowed)})."
    if v == "enum":
        hint = did_you_mean(error.instance, error.validator_value) if isinstance(error.instance, str) else ""
        return (f"{where}: {value} is not one of {', '.join(map(repr, error.validator_value))}"
                + (f"; {hint}" if hint else "."))
    if v == "required":  # names the key the schema requires, not the value
        return f"{where}: {error.message}."
    if v in ("pattern", "propertyNames"):
        return f"{where}: name {value} must match {error.schema.get('pattern', '')} (letters, digits, '.', '-')."
    if v == "type":
        expected = error.validator_value if isinstance(error.validator_value, str) else \
            " or ".join(error.validator_value)
        return f"{where}: {value} is not of type {expected}."
    if v == "const":
        return f"{where}: {value} must be {shown(error.validator_value)}."
    if v in _BOUNDS:
        return f"{where}: {value} {_BOUNDS[v].format(error.validator_value)}."
    text = error.message
    return f"{where}: {text if len(text) <= 300 else text[:300] + '...'}."


def schema_errors(config: dict, schema: dict, config_file: str) -> None:
    """Stop with one ConfigError naming the key of the error that says most (the deepest), if ``config`` does not
    match ``schema``."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(list(e.absolute_path)), str(e.absolute_path)))
    if not errors:
        return
    best = jsonschema.exceptions.best_match(errors)
    # prefer the deepest error: it names the key (unknown key, misspelt type)
    deepest = max(errors, key=lambda e: len(list(e.absolute_path)))
    error = deepest if len(list(deepest.absolute_path)) > len(list(best.absolute_path)) else best
    if error.validator == "propertyNames" or (error.absolute_path == best.absolute_path and best.context):
        error = best
    raise ConfigError(error_message(error), path=config_file, fix=FIX)
