"""The experiment spec: what to benchmark (see docs/spec.md for every key)."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Literal, Optional, Tuple, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ddlbench.frameworks import FrameworkOptions, launchers
from ddlbench.names import check_safe_name
from ddlbench.spec.cluster import EnvName, SbatchOption
from ddlbench.spec.diagnosis import WatchdogSpec
from ddlbench.spec.inject import InjectSpec
from ddlbench.spec.lm import LMKeys, LMSpecKeys
from ddlbench.spec.own_workload import OwnWorkload
from ddlbench.spec.problems import KeyedError, check_sweep_values, keyed_errors
from ddlbench.workloads.vocabulary import (  # noqa: F401 - KNOBS, MODEL_SHAPES: for plan, render
    DEFAULT_LAYOUT,
    DEFAULT_MODE,
    DEFAULT_PRECISION,
    KNOBS,
    LAYOUTS,
    MODEL_SHAPES,
    MODELS,
    MODES,
    PRECISIONS,
    TRANSFORMER_MODELS,
    TRANSPORTS,
)

SWEEP_AXES = ("scale", "batch_size", "seq_len", "variants")
#: the models a spec may name: the CNNs and the transformer language models
ALL_MODELS = MODELS + TRANSFORMER_MODELS
#: numeric precision and activation layout (docs/spec.md#performance-knobs)
Precision = Literal[PRECISIONS]  # type: ignore[valid-type]
Layout = Literal[LAYOUTS]  # type: ignore[valid-type]
Mode = Literal[MODES]  # type: ignore[valid-type]


class Strict(BaseModel):
    """Unknown keys are errors, and values are not coerced: a YAML bool or string is not a
    number, a string is not a bool (an integer where a number is expected is fine)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class FrameworkEntry(Strict):
    """One entry of ``frameworks``: a launcher name, an optional label and its options."""

    name: str
    label: Optional[str] = None
    options: FrameworkOptions

    @field_validator("label")
    @classmethod
    def _label(cls, value: Optional[str]) -> Optional[str]:
        return None if value is None else check_safe_name(value, "framework label")

    @property
    def id_label(self) -> str:
        if self.label:
            return self.label
        suffix = self.options.id_suffix()
        return f"{self.name}-{suffix}" if suffix else self.name


#: one synthetic epoch by default: ImageNet-1k's training set
SYNTHETIC_EPOCH_SAMPLES = 1_281_167


class DataSpec(Strict):
    #: text: Shakespeare tokenized with cl100k, for the transformers (docs/workloads.md)
    kind: Literal["synthetic", "digits", "mnist", "imagefolder", "text"] = "synthetic"
    path: Optional[str] = None
    #: size of one synthetic epoch, in samples (ImageNet-1k's training set by default); the
    #: other kinds have their data set's own size, and no value here
    samples: Optional[int] = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _path_needed(self) -> DataSpec:
        found: List[Tuple[Tuple[Any, ...], str]] = []
        if self.kind in ("mnist", "imagefolder") and not self.path:
            found.append((("kind",), f"data kind '{self.kind}' needs a path"))
        if self.kind in ("synthetic", "digits", "text") and self.path:
            found.append((("path",), f"data kind '{self.kind}' takes no path"))
        if self.kind != "synthetic" and self.samples is not None:
            found.append(
                (
                    ("samples",),
                    f"samples sets the size of a synthetic epoch; data kind '{self.kind}' has "
                    "its data set's own size",
                )
            )
        if found:
            raise keyed_errors(found)
        return self

    @model_validator(mode="before")
    @classmethod
    def _synthetic_epoch(cls, data: Any) -> Any:
        """A synthetic epoch is ImageNet-1k's size unless ``samples`` says otherwise."""
        synthetic = isinstance(data, dict) and data.get("kind", "synthetic") == "synthetic"
        if synthetic and data.get("samples") is None:
            data = dict(data, samples=SYNTHETIC_EPOCH_SAMPLES)
        return data


#: the measured window a throughput run reaches by default (docs/spec.md#steps)
DEFAULT_MEASURE_SECONDS = 10.0


class Steps(Strict):
    """Throughput mode: ``warmup`` steps, then at least ``measure`` measured steps and at
    least ``measure_seconds`` of them, at most ``max_measure`` (docs/spec.md#steps)."""

    warmup: int = Field(default=10, ge=0)
    measure: int = Field(default=50, ge=1)
    measure_seconds: float = Field(default=DEFAULT_MEASURE_SECONDS, ge=0)
    max_measure: Optional[int] = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _cap_above_measure(self) -> Steps:
        if self.max_measure is not None and self.max_measure < self.measure:
            raise KeyedError(
                f"max_measure ({self.max_measure}) is below measure ({self.measure})", "max_measure"
            )
        return self


class Optimizer(Strict):
    #: adamw: the transformers' (betas 0.9, 0.95); sgd: the CNNs'
    name: Literal["sgd", "adamw"] = "sgd"
    lr: float = Field(default=0.1, gt=0)
    momentum: float = Field(default=0.9, ge=0, lt=1)
    weight_decay: float = Field(default=1e-4, ge=0)
    nesterov: bool = False


class LRScaling(Strict):
    rule: Literal["none", "linear", "sqrt"] = "linear"
    base_batch_size: int = Field(default=256, ge=1)
    warmup_epochs: float = Field(default=0, ge=0)
    decay_epochs: List[int] = Field(default_factory=list)
    decay_factor: float = Field(default=0.1, gt=0, le=1)


_POINT = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*$")


class ScalePoint(Strict):
    """One entry of ``scale.points``: ``2x4`` or ``{nodes: 2, gpus_per_node: 4}``, each entry
    checked (and reported at its own line) on its own."""

    nodes: int = Field(ge=1)
    gpus_per_node: int = Field(ge=1)

    @model_validator(mode="before")
    @classmethod
    def _parse(cls, item: Any) -> Any:
        if isinstance(item, int) and not isinstance(item, bool):
            raise ValueError(_number_point(item))
        if not isinstance(item, str):
            return item
        m = _POINT.match(item)
        if not m:
            raise ValueError(f"scale point {item!r} is not of the form NODESxGPUS, e.g. 2x4")
        if min(int(m.group(1)), int(m.group(2))) < 1:
            raise ValueError(
                f"scale point {item!r}: nodes and GPUs per node must each be at least 1"
            )
        return {"nodes": int(m.group(1)), "gpus_per_node": int(m.group(2))}


def _number_point(number: int) -> str:
    """A scale point YAML read as a number: ``0x2`` is hexadecimal 2 to YAML, ``4`` is 4."""
    hexa = f"0x{number:x}"
    return (
        f"scale point {number} is a number, not NODESxGPUS (written {hexa}? YAML reads that "
        f"as the hexadecimal number {number}); nodes and GPUs per node must each be at least 1, "
        f"e.g. 1x{max(number, 1)}"
    )


class Scale(Strict):
    """Either ``nodes`` (+ ``gpus_per_node``) or explicit ``points`` such as ``2x4``."""

    nodes: Optional[List[int]] = None
    gpus_per_node: Optional[int] = Field(default=None, ge=1)
    points: Optional[List[ScalePoint]] = None

    @field_validator("nodes")
    @classmethod
    def _positive(cls, value: Optional[List[int]]) -> Optional[List[int]]:
        if value is not None:
            check_sweep_values(value, 1, "node counts")
        return value

    @model_validator(mode="after")
    def _one_form(self) -> Scale:
        if (self.nodes is None) == (self.points is None):
            raise ValueError("give either 'nodes' (with optional 'gpus_per_node') or 'points'")
        found: List[Tuple[Tuple[Any, ...], str]] = []
        if self.points is not None and self.gpus_per_node is not None:
            message = "'gpus_per_node' goes with 'nodes'; points say it themselves"
            found.append((("gpus_per_node",), message))
        if self.points is not None and not self.points:
            found.append((("points",), "points must list at least one point"))
        if found:
            raise keyed_errors(found)
        return self


class SlurmOverrides(Strict):
    time: Optional[str] = None
    partition: Optional[str] = None
    account: Optional[str] = None
    qos: Optional[str] = None
    exclusive: Optional[bool] = None
    constraint: Optional[str] = None
    extra_sbatch: List[SbatchOption] = Field(default_factory=list)

    @field_validator("time")
    @classmethod
    def _time(cls, value: Optional[str]) -> Optional[str]:
        if value is not None:
            from ddlbench.spec.slurmtime import parse_minutes

            parse_minutes(value)
        return value

    @field_validator("partition", "account", "qos", "constraint")
    @classmethod
    def _word(cls, value: Optional[str]) -> Optional[str]:
        from ddlbench.spec.cluster import check_slurm_word

        return check_slurm_word(value)


class AllreduceSpec(Strict):
    min_bytes: int = Field(default=1024, ge=4)
    max_bytes: int = Field(default=256 * 1024 * 1024, ge=4)
    iters: int = Field(default=20, ge=1)
    warmup: int = Field(default=5, ge=0)
    #: per-node and pairwise tests instead of the sweep: pairs in log2(N) or N-1 rounds
    pairwise: Optional[Literal["log", "all"]] = None


class NetworkChoice(Strict):
    """``network``: how the ranks talk between nodes (docs/spec.md#network)."""

    #: ``rdma`` (InfiniBand or RoCE verbs) or ``tcp`` (sockets); unset: each framework's own
    #: choice. A variant that sets it runs the same job over that transport
    transport: Optional[Literal[TRANSPORTS]] = None  # type: ignore[valid-type]


class Variant(Strict, LMKeys):
    """A named set of overrides crossed with (or zipped into) the sweep.

    Only the keys written in the spec override; ``model_fields_set`` tells which.
    """

    label: str
    lr_scaling: Optional[LRScaling] = None
    optimizer: Optional[Optimizer] = None
    precision: Optional[Precision] = None
    layout: Optional[Layout] = None
    compile: Optional[bool] = None
    env: Dict[EnvName, str] = Field(default_factory=dict)
    #: stragglers on purpose, replacing the spec's inject (docs/stragglers.md)
    inject: Optional[InjectSpec] = None
    #: the transport between nodes, replacing the spec's (docs/spec.md#network)
    network: Optional[NetworkChoice] = None

    @field_validator("label")
    @classmethod
    def _label(cls, value: str) -> str:
        return check_safe_name(value, "variant label")


class MLLogSpec(Strict):
    """``mllog`` as a mapping: MLPerf submission metadata (defaults suit a research run)."""

    org: str = Field(default="unspecified", min_length=1)
    #: the system's name; default: the cluster profile's name
    platform: Optional[str] = Field(default=None, min_length=1)
    division: Literal["open", "closed"] = "open"
    status: Literal["onprem", "cloud", "preview", "research"] = "research"


def mllog_run_config(value: Union[bool, MLLogSpec], profile_name: str) -> Any:
    """run.json's ``mllog``: false, or the submission metadata with defaults filled in."""
    if value is False:
        return False
    spec = value if isinstance(value, MLLogSpec) else MLLogSpec()
    return dict(spec.model_dump(), platform=spec.platform or profile_name)


class ExperimentSpec(Strict, LMSpecKeys):
    name: str
    description: str = ""
    cluster: Optional[str] = None
    mode: Mode = DEFAULT_MODE
    model: str = "resnet50"
    data: DataSpec = Field(default_factory=DataSpec)
    frameworks: List[FrameworkEntry]
    batch_size: Union[int, List[int]] = 32
    global_batch_size: Optional[int] = Field(default=None, ge=1)
    scaling: Literal["weak", "strong"] = "weak"
    precision: Precision = DEFAULT_PRECISION
    #: activation layout: the framework's default or channels_last (NHWC)
    layout: Layout = DEFAULT_LAYOUT
    #: graph compilation: torch.compile, XLA jit_compile, MXNet static hybridize
    compile: bool = False
    steps: Steps = Field(default_factory=Steps)
    epochs: Optional[int] = Field(default=None, ge=1)
    target_accuracy: Optional[float] = Field(default=None, gt=0, le=1)
    optimizer: Optimizer = Field(default_factory=Optimizer)
    lr_scaling: LRScaling = Field(default_factory=LRScaling)
    scale: Scale
    repeats: int = Field(default=1, ge=1, le=1000)
    variants: List[Variant] = Field(default_factory=list)
    zip: List[Literal["scale", "batch_size", "seq_len", "variants"]] = Field(default_factory=list)
    seed: int = 1234
    allreduce: AllreduceSpec = Field(default_factory=AllreduceSpec)
    slurm: SlurmOverrides = Field(default_factory=SlurmOverrides)
    env: Dict[EnvName, str] = Field(default_factory=dict)
    #: container image for every framework, replacing the image of the profile's container
    container: Optional[str] = None
    mllog: Union[bool, MLLogSpec] = False
    #: hang detection (docs/bad-nodes.md): limits, or false to disarm
    watchdog: Union[bool, WatchdogSpec] = True
    #: NCCL/torch.distributed/Gloo/Horovod debug output, kept with the attempt's logs
    comm_debug: bool = False
    #: stragglers on purpose (docs/stragglers.md)
    inject: Optional[InjectSpec] = None
    #: the user's own training program instead of a model (docs/your-own-workload.md)
    workload: Optional[OwnWorkload] = None

    @model_validator(mode="before")
    @classmethod
    def _own_framework(cls, data: Any) -> Any:
        # workload.framework is the one framework entry; the loader builds it with positions
        own = data.get("workload") if isinstance(data, dict) else None
        if isinstance(own, dict) and "frameworks" not in data and own.get("framework") is not None:
            data = dict(data, frameworks=[own["framework"]])
        return data

    #: the transport between nodes (docs/spec.md#network); a variant's wins
    network: NetworkChoice = Field(default_factory=NetworkChoice)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_safe_name(value, "name")

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        if value not in ALL_MODELS:
            from ddlbench.errors import did_you_mean

            raise ValueError(
                f"{value!r} is not one of {', '.join(ALL_MODELS)}{did_you_mean(value, ALL_MODELS)}"
            )
        return value

    @field_validator("data", mode="before")
    @classmethod
    def _data_short(cls, value: Any) -> Any:
        # shorthand: 'synthetic', 'digits', or a path (with a '/') to an image folder
        if isinstance(value, str):
            if value in ("synthetic", "digits", "text"):
                return {"kind": value}
            if "/" in value:
                return {"kind": "imagefolder", "path": value}
            from ddlbench.errors import did_you_mean

            if value in ("mnist", "imagefolder"):
                raise ValueError(f"data kind '{value}' needs a path: {{kind: {value}, path: ...}}")
            raise ValueError(
                f"{value!r} is not synthetic, digits, text or a path to an image folder "
                f"(with a '/'){did_you_mean(value, ['synthetic', 'digits', 'text'])}"
            )
        return value

    @field_validator("frameworks", mode="before")
    @classmethod
    def _frameworks(cls, value: Any) -> Any:
        # The loader builds entries with positions (ddlbench.spec.load); programmatic callers may
        # pass names or mappings, validated here.
        if not isinstance(value, list):
            return value
        return [build_framework_entry(item) for item in value]

    @field_validator("frameworks")
    @classmethod
    def _labels(cls, value: List[FrameworkEntry]) -> List[FrameworkEntry]:
        if not value:
            raise ValueError("list at least one framework")
        seen: Dict[str, int] = {}
        found: List[Tuple[Tuple[Any, ...], str]] = []
        for i, entry in enumerate(value):
            label = entry.id_label
            if label in seen:
                found.append(
                    (
                        (i,),
                        f"frameworks[{i}] and frameworks[{seen[label]}] would both be labelled "
                        f"'{label}'; give one of them a distinct 'label'",
                    )
                )
            seen.setdefault(label, i)
        if found:
            raise keyed_errors(found)
        return value

    @field_validator("batch_size")
    @classmethod
    def _batches(cls, value: Union[int, List[int]]) -> Union[int, List[int]]:
        check_sweep_values(value, 1, "batch sizes")
        return value

    @field_validator("variants")
    @classmethod
    def _variants(cls, value: List[Variant]) -> List[Variant]:
        first: Dict[str, int] = {}
        found: List[Tuple[Tuple[Any, ...], str]] = []
        for i, variant in enumerate(value):
            if variant.label in first:
                found.append(
                    (
                        (i, "label"),
                        f"variant label '{variant.label}' is already used by "
                        f"variants[{first[variant.label]}]; variant labels must be unique",
                    )
                )
            first.setdefault(variant.label, i)
        if found:
            raise keyed_errors(found)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ExperimentSpec:
        """The rules between keys, every one that fails, each placed at the key it is about."""
        found = self._mode_rules() + self._batch_rules() + self._allreduce_rules()
        found += self._zip_rules()
        if self.workload is not None and len(self.frameworks) != 1:
            found.append(
                (
                    ("frameworks",),
                    "a spec with a 'workload' has one framework: workload.framework",
                )
            )
        if found:
            raise keyed_errors(found)
        return self

    def _mode_rules(self) -> List[Tuple[Tuple[Any, ...], str]]:
        found: List[Tuple[Tuple[Any, ...], str]] = []
        if self.mode == "convergence" and self.epochs is None:
            found.append((("mode",), "mode 'convergence' needs 'epochs'"))
        if self.mode != "convergence" and self.target_accuracy is not None:
            found.append(
                (("target_accuracy",), "'target_accuracy' applies to mode 'convergence' only")
            )
        if self.workload is not None and self.mode != "throughput":
            found.append((("mode",), "a spec's own 'workload' is measured in mode throughput only"))
        return found

    def _batch_rules(self) -> List[Tuple[Tuple[Any, ...], str]]:
        found: List[Tuple[Tuple[Any, ...], str]] = []
        if self.scaling == "strong" and self.global_batch_size is None:
            found.append(
                (("scaling",), "scaling 'strong' needs 'global_batch_size' (it stays fixed)")
            )
        if self.scaling == "weak" and self.global_batch_size is not None:
            found.append(
                (("global_batch_size",), "'global_batch_size' applies to scaling 'strong' only")
            )
        if "batch_size" in self.model_fields_set and (
            self.scaling == "strong" or self.mode == "allreduce"
        ):
            found.append(
                (
                    ("batch_size",),
                    "'batch_size' is not used here: strong scaling fixes 'global_batch_size', "
                    "and allreduce runs have no batch",
                )
            )
        return found

    def _allreduce_rules(self) -> List[Tuple[Tuple[Any, ...], str]]:
        found: List[Tuple[Tuple[Any, ...], str]] = []
        if self.mode == "allreduce":
            for i, entry in enumerate(self.frameworks):
                if "allreduce" not in launchers()[entry.name].modes:
                    message = f"framework '{entry.name}' has no allreduce workload"
                    found.append((("frameworks", i), message))
        if self.allreduce.min_bytes > self.allreduce.max_bytes:
            found.append(
                (
                    ("allreduce", "min_bytes"),
                    "allreduce.min_bytes is larger than allreduce.max_bytes",
                )
            )
        return found

    def _zip_rules(self) -> List[Tuple[Tuple[Any, ...], str]]:
        found: List[Tuple[Tuple[Any, ...], str]] = []
        for i, axis in enumerate(self.zip):
            if axis in self.zip[:i]:
                found.append((("zip", i), "zip lists an axis twice"))
        if self.zip and len(set(self.zip)) < 2:
            found.append((("zip",), "zip needs at least two axes (scale, batch_size, variants)"))
        if "variants" in self.zip and not self.variants:
            at = ("zip", self.zip.index("variants"))
            found.append((at, "zip names 'variants' but none are defined"))
        return found

    @property
    def batch_sizes(self) -> List[int]:
        return self.batch_size if isinstance(self.batch_size, list) else [self.batch_size]


def file_problems(spec: ExperimentSpec) -> List[Tuple[Tuple[Any, ...], str]]:
    """``(where, message)`` of what a spec file asks that its runs would refuse when they
    start, checked by the loader (specs built in code, as the tests' synthetic campaigns,
    may describe runs that never ran): convergence needs a validation split."""
    if spec.mode == "convergence" and spec.data.kind == "synthetic":
        where = "data" if "data" in spec.model_fields_set else "mode"
        return [
            (
                (where,),
                "mode 'convergence' evaluates on a validation split after each epoch, and "
                "data kind 'synthetic' has none (use digits, mnist or an imagefolder)",
            )
        ]
    return []


def build_framework_entry(item: Any) -> Any:
    """``'pytorch'`` or ``{name: pytorch, label: x, backend: gloo}`` -> :class:`FrameworkEntry`.

    Raises ``ValueError`` for an unknown name and pydantic's ``ValidationError`` (with locations
    relative to the entry) for bad options.
    """
    from ddlbench.errors import did_you_mean

    if isinstance(item, FrameworkEntry):
        return item
    if isinstance(item, str):
        item = {"name": item}
    if not isinstance(item, dict):
        raise ValueError("a framework entry is a name or a mapping with 'name' and options")
    names = list(launchers())
    name = item.get("name")
    if name is None:
        raise ValueError(f"a framework entry needs a 'name' (one of {', '.join(names)})")
    if name not in names:
        raise ValueError(f"{name!r} is not one of {', '.join(names)}{did_you_mean(name, names)}")
    label = item.get("label")
    options = {k: v for k, v in item.items() if k not in ("name", "label")}
    model = launchers()[name].options
    return FrameworkEntry(name=name, label=label, options=model(**options))
