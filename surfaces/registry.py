"""The registry: every tool declared once, validated at registration, bound by surface.

A tier's binding is computed from declarations alone: the tools with a surface that meets one of
the tier's `binds`, sorted by name. Surfaces are dotted and nest: a bind `wake` meets the tool
surfaces `wake`, `wake.whisper`, `wake.surface`, `wake.full`; a tool declaring `wake` is met by
every bind under it (`wake.whisper` included). `chat` and `cli` never meet a wake bind.

Tools come from the built-in set (`surfaces.builtin`), from operator modules named in
`tools.modules`, and from the entry-point group `wake.tools`. A module or entry point provides
either a `register(registry)` callable or an iterable `TOOLS` of `Tool`.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib
import importlib.metadata
import inspect
import re
import traceback
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from surfaces import checked_schemas, flow_labels, names, schema_patterns
from surfaces.checked_schemas import CheckedSchemas
from surfaces.errors import DeclarationError

ENTRY_POINT_GROUP = "wake.tools"
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # the OpenAI function-name rule
# The digests (surfaces.checked_schemas.digest) of the tool schemas that passed the metaschema
# check in this process: a schema is checked once a process, however often the registry is built.
_PASSED_IN_THIS_PROCESS: set[str] = set()

Handler = Callable[..., Awaitable[Any]]


@dataclass(frozen=True, kw_only=True)
class Tool:
    name: str
    description: str
    parameters: Mapping[str, object]
    version: str
    handler: Handler
    mutates: bool
    surfaces: frozenset[str]
    origin: str = field(default="builtin", compare=False)
    # A call is not run in the wake whose model made it: it waits for an operator's decision and,
    # approved, runs at the agent's next wake (docs/approvals.md). Declared by the tool, or marked
    # by the operator's `tools.requires_approval` (`Registry.require_approval`). Not part of the
    # declaration the manifest hashes and MCP pins compare: it is the operator's policy, not the tool's contract.
    requires_approval: bool = field(default=False, compare=False)
    # Flow labels (surfaces/flow_labels.py): what the tool lets in, reads, sends out. Declared by the
    # tool (a built-in's from `flows.BUILTIN`), an MCP tool's from its annotations, replaced by the
    # operator's `tools.flows` globs; like `requires_approval`, not part of the hashed declaration.
    flows: frozenset[str] = field(default=frozenset(), compare=False)

    def declaration(self) -> dict[str, object]:
        """The canonical declaration hashed into the manifest (docs/design.md, step 6)."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "version": self.version,
        }


def surface_meets(bind: str, surface: str) -> bool:
    """True when a tier's bind covers a tool's declared surface (either may be the broader one)."""
    return surface == bind or surface.startswith(bind + ".") or bind.startswith(surface + ".")


class Registry:
    def __init__(self, known_surfaces: Iterable[str] = names.BUILTIN_SURFACES, *, checked: CheckedSchemas | None = None) -> None:
        """`checked`: the schemas that passed the metaschema check before (not checked again)."""
        self.known_surfaces = frozenset(known_surfaces)
        self.checked = checked
        self._tools: dict[str, Tool] = {}
        self.attached: list[Any] = []  # sources whose tools come and go (surfaces.mcp.Hub): `tools()`
        self.approval_rules: tuple[str, ...] = ()  # globs over tool names the operator marked `requires_approval`
        self.flow_rules: tuple[tuple[str, frozenset[str]], ...] = ()  # (glob over tool names, the labels it gives)
        # id(declared tool) -> (it, its marked copy): one copy per Tool, so its manifest hash is computed once
        self._marked_copies: dict[int, tuple[Tool, Tool]] = {}

    def _all(self) -> dict[str, Tool]:
        tools = self._tools if not self.attached else {**self._tools, **{t.name: t for source in self.attached for t in source.tools()}}
        if not self.approval_rules and not self.flow_rules:
            return tools
        return {name: self._marked(t) for name, t in tools.items()}

    def require_approval(self, rules: Iterable[str]) -> None:
        """Mark every tool whose name matches one of these globs (MCP tools by their `server__tool`
        name) as requiring approval, whatever it declares."""
        self.approval_rules = tuple(rules)

    def label(self, rules: Iterable[tuple[str, Iterable[str]]]) -> None:
        """The operator's flow labels: a tool whose name the last of these globs matches carries
        that glob's labels instead of its own (MCP tools by their `server__tool` name)."""
        self.flow_rules = tuple((pattern, frozenset(labels)) for pattern, labels in rules)

    def _marked(self, tool: Tool) -> Tool:
        approval = tool.requires_approval or any(fnmatch.fnmatchcase(tool.name, rule) for rule in self.approval_rules)
        labels = flow_labels.overridden(tool.name, tool.flows, self.flow_rules)
        if approval == tool.requires_approval and labels == tool.flows:
            return tool
        hit = self._marked_copies.get(id(tool))
        if hit is None or hit[0] is not tool:
            hit = self._marked_copies[id(tool)] = (tool, dataclasses.replace(tool, requires_approval=approval, flows=labels))
        return hit[1]

    def __len__(self) -> int:
        return len(self._all())

    def __iter__(self) -> Any:
        return iter(sorted(self._all().values(), key=lambda t: t.name))

    def __contains__(self, name: object) -> bool:
        return name in self._all()

    def get(self, name: str) -> Tool:
        return self._all()[name]

    def attach(self, source: Any) -> None:
        """Add a source of tools that change while the process runs (an MCP server's, re-listed);
        each tool it lists is validated as a registered one is, except that it may declare no
        surface (registered, never bound: the operator gave it none)."""
        source.bind_checker(self.check_attached)
        self.attached.append(source)

    def check_attached(self, tool: Tool) -> None:
        self._validate(tool, surfaced=False)

    def register(self, tool: Tool) -> Tool:
        self._validate(tool)
        if tool.origin == "builtin" and not tool.flows and tool.name in flow_labels.BUILTIN:
            tool = dataclasses.replace(tool, flows=flow_labels.BUILTIN[tool.name])
        self._tools[tool.name] = tool
        return tool

    def _validate(self, tool: Tool, *, surfaced: bool = True) -> None:
        where = f"tool {tool.name!r} ({tool.origin})"
        if not isinstance(tool.name, str) or not _NAME.match(tool.name):
            raise DeclarationError(f"{where}: name must match {_NAME.pattern}")
        if tool.name in self._tools:
            raise DeclarationError(f"{where}: duplicate name, already declared by {self._tools[tool.name].origin}")
        if not isinstance(tool.description, str) or not tool.description.strip():
            raise DeclarationError(f"{where}: empty description")
        if not isinstance(tool.version, str) or not tool.version.strip():
            raise DeclarationError(f"{where}: empty version")
        if not inspect.iscoroutinefunction(tool.handler):
            raise DeclarationError(f"{where}: handler must be an async function")
        if not isinstance(tool.parameters, Mapping) or tool.parameters.get("type") != "object":
            raise DeclarationError(f"{where}: parameters must be a JSON schema of type 'object'")
        self._check_schema(where, tool.parameters)
        self._validate_patterns(where, tool.parameters)
        if surfaced and not tool.surfaces:
            raise DeclarationError(f"{where}: declares no surface")
        unknown = sorted(set(tool.surfaces) - self.known_surfaces)
        if unknown:
            raise DeclarationError(f"{where}: unknown surface {unknown[0]!r}; known: {', '.join(sorted(self.known_surfaces))}")
        strange = sorted(set(tool.flows) - set(flow_labels.LABELS))
        if strange:
            raise DeclarationError(f"{where}: unknown flow label {strange[0]!r}; known: {', '.join(flow_labels.LABELS)}")

    def _check_schema(self, where: str, parameters: Mapping[str, object]) -> None:
        known = checked_schemas.digest(parameters)
        if known not in _PASSED_IN_THIS_PROCESS and not (self.checked is not None and self.checked.knows(known)):
            import jsonschema  # loaded with the first schema to check, not by every command that imports the registry

            try:
                jsonschema.Draft202012Validator.check_schema(dict(parameters))
            except jsonschema.SchemaError as exc:
                raise DeclarationError(f"{where}: invalid JSON schema: {exc.message}") from None
        _PASSED_IN_THIS_PROCESS.add(known)
        if self.checked is not None:
            self.checked.add(known)

    @staticmethod
    def _validate_patterns(where: str, parameters: Mapping[str, object]) -> None:
        """Every regex in the schema (valid ones: check_schema saw to that) is one that
        grammar-constrained servers can compile."""
        for at, pattern in schema_patterns.patterns(parameters):
            why = schema_patterns.problem(pattern)
            if why:
                raise DeclarationError(f"{where}: {at} {pattern!r} {why}; servers that compile tool schemas to grammars cannot use it")

    def binding(self, binds: Iterable[str]) -> list[Tool]:
        """The tools a tier with these binds holds, sorted by name."""
        binds = tuple(binds)
        return [t for t in self if any(surface_meets(b, s) for b in binds for s in t.surfaces)]

    def load_module(self, module_name: str) -> None:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise DeclarationError(f"tools module {module_name!r} cannot be imported: {exc}") from exc
        except Exception as exc:  # the module's own code ran and failed: a syntax error, a raise at import
            raise DeclarationError(f"tools module {module_name!r} raised at import: {_one_line(exc)}") from exc
        self._load_provider(module, origin=f"module {module_name}")

    def load_entry_points(self) -> None:
        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                provider = entry.load()
            except Exception as exc:  # an entry point's import can fail in any way
                raise DeclarationError(f"entry point {entry.name!r} ({entry.value}) cannot be loaded: {_one_line(exc)}") from exc
            self._load_provider(provider, origin=f"entry point {entry.name}")

    def _load_provider(self, provider: object, *, origin: str) -> None:
        register = getattr(provider, "register", None)
        tools = getattr(provider, "TOOLS", None)
        if callable(provider) and not inspect.ismodule(provider):
            register = provider
        if register is not None:
            before = set(self._tools)
            try:
                register(_OriginRegistry(self, origin))
            except DeclarationError:
                raise
            except Exception as exc:  # the provider's own code failed
                raise DeclarationError(f"{origin}: register() raised {_one_line(exc)}") from exc
            if set(self._tools) == before:
                raise DeclarationError(f"{origin}: register() declared no tools")
        elif tools is not None:
            if isinstance(tools, (str, bytes)) or not isinstance(tools, Iterable):
                raise DeclarationError(f"{origin}: TOOLS must be a list of surfaces.registry.Tool, got {type(tools).__name__}")
            for tool in tools:
                self.register(_with_origin(tool, origin))
        else:
            raise DeclarationError(f"{origin}: provides neither register(registry) nor TOOLS")


class _OriginRegistry:
    """What a provider's `register()` receives: registration stamped with the provider's origin."""

    def __init__(self, registry: Registry, origin: str) -> None:
        self._registry = registry
        self._origin = origin

    def register(self, tool: Tool) -> Tool:
        return self._registry.register(_with_origin(tool, self._origin))


def _one_line(exc: BaseException) -> str:
    """An exception as one line: its type, its message with newlines folded, and where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    if isinstance(exc, SyntaxError) and exc.filename:  # the frame is the importer's; the error is in the file
        where = f" (at {exc.filename}:{exc.lineno})"
        message = exc.msg
    else:
        message = str(exc)
    return f"{type(exc).__name__}: {' '.join(message.split()) or '(no message)'}{where}"


def _with_origin(tool: object, origin: str) -> Tool:
    if not isinstance(tool, Tool):
        raise DeclarationError(f"{origin}: {tool!r} is not a surfaces.registry.Tool")
    return Tool(**{**tool.__dict__, "origin": origin})


def tool(
    *, name: str, description: str, parameters: Mapping[str, object], surfaces: Iterable[str], mutates: bool = False, version: str = "1",
    requires_approval: bool = False, flows: Iterable[str] = (),
) -> Callable[[Handler], Tool]:
    """Decorator: declare an async handler as a tool; `requires_approval` holds every call of it
    for an operator's decision (docs/approvals.md); `flows` are its flow labels (surfaces/flow_labels.py)."""

    def wrap(handler: Handler) -> Tool:
        return Tool(
            name=name, description=description, parameters=parameters, version=version,
            handler=handler, mutates=mutates, surfaces=frozenset(surfaces), requires_approval=requires_approval,
            flows=frozenset(flows),
        )

    return wrap
