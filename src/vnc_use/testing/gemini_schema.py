"""The known fields of a ``generateContent`` request body, checked like the real API's parser.

The Gemini API parses the JSON body into its protocol buffers before anything else and
answers 400 INVALID_ARGUMENT for a name it does not know or a value of the wrong kind, e.g.::

    Invalid JSON payload received. Unknown name "foo" at 'contents[0].parts[0]': Cannot find field.
    Invalid JSON payload received. Unknown name "response" at
        'contents[2].parts[0].function_response': Proto field is not repeating, cannot start list.
    Invalid value at 'contents[2].parts[0].function_response.response'
        (type.googleapis.com/google.protobuf.Struct), "done"

(wordings as reported from the live API in public issue threads, e.g. gemini-cli #13972,
LibreChat #5525 and #11761, zed #62539). Paths use the proto field names (snake_case) and
``[i]`` indexes; a map entry is ``name[i].value``. Like proto3 JSON parsers, both the
lowerCamelCase JSON name and the snake_case proto name of a field are accepted (the SDK sends
a mix: ``inlineData`` holding ``mime_type``), a ``null`` value counts as absent, and a single
value stands for a one-item list in a repeated field.

:data:`MESSAGES` lists the fields of the v1beta REST reference for the messages the SDK sends
(``GenerateContentRequest`` down to ``Part``, ``FunctionCall``, ``FunctionResponse``, ``Tool``,
``ComputerUse``, ``FunctionDeclaration``, ``Schema``, ``GenerationConfig``, ``ThinkingConfig``,
``ToolConfig``, ``SafetySetting``). Fields of kind ``any`` (``args``, ``parametersJsonSchema``,
and messages the stand-in does not model, such as ``speechConfig`` or ``googleSearch``) are not
looked into.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MESSAGES", "Field", "schema_problems"]

_PACKAGE = "google.ai.generativelanguage.v1beta"


@dataclass(frozen=True)
class Field:
    """One field: its kind (a scalar kind or a message name), repeated or a string-keyed map.

    Scalar kinds: ``string``, ``bytes``, ``enum``, ``bool``, ``int``, ``float``; ``struct`` is
    a JSON object (``google.protobuf.Struct``); ``any`` is any JSON value, not checked.
    """

    kind: str
    repeated: bool = False
    map: bool = False


_S, _B, _E, _BOOL, _I, _FL = (Field(k) for k in ("string", "bytes", "enum", "bool", "int", "float"))
_ANY, _STRUCT = Field("any"), Field("struct")


def _list(kind: str) -> Field:
    return Field(kind, repeated=True)


MESSAGES: dict[str, dict[str, Field]] = {
    "GenerateContentRequest": {
        "model": _S,
        "contents": _list("Content"),
        "tools": _list("Tool"),
        "toolConfig": Field("ToolConfig"),
        "safetySettings": _list("SafetySetting"),
        "systemInstruction": Field("Content"),
        "generationConfig": Field("GenerationConfig"),
        "cachedContent": _S,
        "store": _BOOL,
        "serviceTier": _E,
    },
    "Content": {"role": _S, "parts": _list("Part")},
    "Part": {
        "text": _S,
        "inlineData": Field("Blob"),
        "functionCall": Field("FunctionCall"),
        "functionResponse": Field("FunctionResponse"),
        "fileData": Field("FileData"),
        "executableCode": _ANY,
        "codeExecutionResult": _ANY,
        "toolCall": _ANY,
        "toolResponse": _ANY,
        "videoMetadata": _ANY,
        "thought": _BOOL,
        "thoughtSignature": _B,
        "partMetadata": _STRUCT,
        "mediaResolution": _ANY,
    },
    "Blob": {"mimeType": _S, "data": _B},
    "FileData": {"mimeType": _S, "fileUri": _S},
    "FunctionCall": {"id": _S, "name": _S, "args": _ANY},
    "FunctionResponse": {
        "id": _S,
        "name": _S,
        "response": _STRUCT,
        "parts": _list("FunctionResponsePart"),
        "willContinue": _BOOL,
        "scheduling": _E,
    },
    # The Developer API's FunctionResponsePart has one data field: inline media.
    "FunctionResponsePart": {"inlineData": Field("FunctionResponseBlob")},
    "FunctionResponseBlob": {"mimeType": _S, "data": _B, "displayName": _S},
    "Tool": {
        "functionDeclarations": _list("FunctionDeclaration"),
        "computerUse": Field("ComputerUse"),
        "googleSearchRetrieval": _ANY,
        "codeExecution": _ANY,
        "googleSearch": _ANY,
        "urlContext": _ANY,
        "fileSearch": _ANY,
        "googleMaps": _ANY,
        "mcpServers": _ANY,
    },
    "ComputerUse": {"environment": _E, "excludedPredefinedFunctions": _list("string")},
    "FunctionDeclaration": {
        "name": _S,
        "description": _S,
        "behavior": _E,
        "parameters": Field("Schema"),
        "parametersJsonSchema": _ANY,
        "response": Field("Schema"),
        "responseJsonSchema": _ANY,
    },
    "Schema": {
        "type": _E,
        "format": _S,
        "title": _S,
        "description": _S,
        "nullable": _BOOL,
        "enum": _list("string"),
        "maxItems": _I,
        "minItems": _I,
        "items": Field("Schema"),
        "properties": Field("Schema", map=True),
        "required": _list("string"),
        "minProperties": _I,
        "maxProperties": _I,
        "minLength": _I,
        "maxLength": _I,
        "pattern": _S,
        "example": _ANY,
        "anyOf": _list("Schema"),
        "propertyOrdering": _list("string"),
        "default": _ANY,
        "minimum": _FL,
        "maximum": _FL,
    },
    "ToolConfig": {
        "functionCallingConfig": Field("FunctionCallingConfig"),
        "retrievalConfig": _ANY,
        "includeServerSideToolInvocations": _BOOL,
    },
    "FunctionCallingConfig": {"mode": _E, "allowedFunctionNames": _list("string")},
    "SafetySetting": {"category": _E, "threshold": _E},
    "GenerationConfig": {
        "stopSequences": _list("string"),
        "responseMimeType": _S,
        "responseSchema": Field("Schema"),
        "responseJsonSchema": _ANY,
        "responseModalities": _list("enum"),
        "candidateCount": _I,
        "maxOutputTokens": _I,
        "temperature": _FL,
        "topP": _FL,
        "topK": _I,
        "seed": _I,
        "presencePenalty": _FL,
        "frequencyPenalty": _FL,
        "responseLogprobs": _BOOL,
        "logprobs": _I,
        "enableEnhancedCivicAnswers": _BOOL,
        "speechConfig": _ANY,
        "thinkingConfig": Field("ThinkingConfig"),
        "imageConfig": _ANY,
        "mediaResolution": _E,
    },
    "ThinkingConfig": {"includeThoughts": _BOOL, "thinkingBudget": _I, "thinkingLevel": _E},
}
"""Known fields per message, by their lowerCamelCase JSON names."""

_PROTO_TYPES = {
    "string": "TYPE_STRING",
    "bytes": "TYPE_BYTES",
    "enum": "TYPE_ENUM",
    "bool": "TYPE_BOOL",
    "int": "TYPE_INT32",
    "float": "TYPE_FLOAT",
}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


_ALIASES: dict[str, dict[str, str]] = {
    message: {**{_snake(f): f for f in fields}, **{f: f for f in fields}}
    for message, fields in MESSAGES.items()
}


def schema_problems(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What the API's JSON parser refuses in ``body``, as ``(rule, message)`` (empty: fine).

    Rules: ``unknown_field`` (a name the message does not have), ``function_response_value``
    (``functionResponse.response`` that is not a JSON object) and ``field_value`` (any other
    value of the wrong kind).
    """
    return list(_walk(body, "GenerateContentRequest", ""))


def _walk(obj: Mapping[str, Any], message: str, path: str) -> Iterator[tuple[str, str]]:
    at = f" at '{path}'" if path else ""
    for key, value in obj.items():
        name = _ALIASES[message].get(key)
        if name is None:
            yield (
                "unknown_field",
                f'Invalid JSON payload received. Unknown name "{key}"{at}: Cannot find field.',
            )
            continue
        if value is None:  # JSON null: the field's default
            continue
        field = MESSAGES[message][name]
        rule = (
            "function_response_value"
            if (message, name) == ("FunctionResponse", "response")
            else "field_value"
        )
        sub = f"{path}.{_snake(name)}" if path else _snake(name)
        if field.map:
            if not isinstance(value, Mapping):
                yield rule, _invalid(sub, field.kind, value)
                continue
            for i, item in enumerate(value.values()):
                yield from _value(item, field.kind, f"{sub}[{i}].value", rule)
        elif field.repeated:
            items = value if isinstance(value, list) else [value]
            for i, item in enumerate(items):
                yield from _value(item, field.kind, f"{sub}[{i}]", rule)
        elif isinstance(value, list):
            yield (
                rule,
                f'Invalid JSON payload received. Unknown name "{key}"{at}: '
                f"Proto field is not repeating, cannot start list.",
            )
        else:
            yield from _value(value, field.kind, sub, rule)


def _value(value: Any, kind: str, path: str, rule: str) -> Iterator[tuple[str, str]]:
    if kind == "any" or value is None:
        return
    if kind in MESSAGES or kind == "struct":
        if not isinstance(value, Mapping):
            yield rule, _invalid(path, kind, value)
        elif kind != "struct":
            yield from _walk(value, kind, path)
        return
    ok = {
        "string": isinstance(value, str),
        "bytes": isinstance(value, str),
        "enum": isinstance(value, (str, int)) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "int": isinstance(value, (int, str)) and not isinstance(value, bool),
        "float": isinstance(value, (int, float, str)) and not isinstance(value, bool),
    }[kind]
    if not ok:
        yield rule, _invalid(path, kind, value)


def _invalid(path: str, kind: str, value: Any) -> str:
    if kind == "struct":
        type_name = "type.googleapis.com/google.protobuf.Struct"
    elif kind in MESSAGES:
        type_name = f"type.googleapis.com/{_PACKAGE}.{kind}"
    else:
        type_name = _PROTO_TYPES[kind]
    shown = json.dumps(value, separators=(",", ":"), default=str)
    return f"Invalid value at '{path}' ({type_name}), {shown}"
