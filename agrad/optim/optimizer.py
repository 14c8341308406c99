"""The base class of every optimizer (mirrors ``torch.optim.optimizer``).

An :class:`Optimizer` holds ``param_groups`` (a list of dicts: the group's
``params`` and its hyper-parameters, every key of ``defaults`` filled in) and
``state`` (a ``defaultdict(dict)`` keyed by parameter: the moments, momentum
buffers and step counts an update keeps).  ``state_dict()`` and
``load_state_dict()`` use PyTorch's format, parameters replaced by their
index in the order of the groups, so a state dict saved by PyTorch (its
tensors converted with ``agrad.from_numpy``) loads here and the other way
round.  Step hooks, state-dict hooks and their handles are PyTorch's.

Note [Updates on arrays]
~~~~~~~~~~~~~~~~~~~~~~~~
``step()`` records nothing: it reads ``p.grad`` and writes ``p`` and its
state through their arrays, with in-place ufuncs (``_elementwise``,
``_arrayops``), and bumps each parameter's version counter once, as
PyTorch's in-place update does (a graph that saved the parameter then
refuses to backward through its old value).  It never waits: an optimizer
step is synchronous, like the forward.  ``differentiable=True`` (PyTorch
records the update so that a backward can flow through it) is not supported.
"""

from __future__ import annotations

import functools
import inspect
import warnings
import weakref
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable
from copy import deepcopy
from itertools import chain
from typing import Any, TypeAlias, TypeVar, cast

import numpy as np

from agrad._creation import typename
from agrad._grad_mode import enable_grad, no_grad
from agrad._graph._hooks import RemovableHandle, _add_hook
from agrad._tensor import Tensor

__all__ = ["Optimizer", "register_optimizer_step_pre_hook", "register_optimizer_step_post_hook"]

Args: TypeAlias = tuple[Any, ...]
Kwargs: TypeAlias = dict[str, Any]
StateDict: TypeAlias = dict[str, Any]
ParamsT: TypeAlias = Iterable[Tensor] | Iterable[dict[str, Any]] | Iterable[tuple[str, Tensor]]
GlobalOptimizerPreHook: TypeAlias = Callable[["Optimizer", Args, Kwargs], "tuple[Args, Kwargs] | None"]
GlobalOptimizerPostHook: TypeAlias = Callable[["Optimizer", Args, Kwargs], None]

_global_optimizer_pre_hooks: dict[int, GlobalOptimizerPreHook] = OrderedDict()
_global_optimizer_post_hooks: dict[int, GlobalOptimizerPostHook] = OrderedDict()

F = TypeVar("F", bound=Callable[..., Any])


class _RequiredParameter:
    """The default of a hyper-parameter every group must give (PyTorch's ``required``)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


def register_optimizer_step_pre_hook(hook: GlobalOptimizerPreHook) -> RemovableHandle:
    """Register ``hook(optimizer, args, kwargs) -> None or (args, kwargs)``, called before
    every optimizer's ``step``.

        >>> handle = agrad.optim.optimizer.register_optimizer_step_pre_hook(lambda opt, args, kwargs: None)
        >>> handle.remove()
    """
    return _add_hook(_global_optimizer_pre_hooks, hook)


def register_optimizer_step_post_hook(hook: GlobalOptimizerPostHook) -> RemovableHandle:
    """Register ``hook(optimizer, args, kwargs) -> None``, called after every optimizer's ``step``."""
    return _add_hook(_global_optimizer_post_hooks, hook)


def _scalar(x: float | Tensor) -> float:
    """A hyper-parameter as a Python float (PyTorch accepts a 1-element tensor ``lr``)."""
    return float(x) if isinstance(x, Tensor) else x


def _use_grad(step: F) -> F:
    """Run ``step`` under ``no_grad`` (PyTorch's ``_use_grad_for_differentiable``, where
    ``differentiable`` is always False here: Note [Updates on arrays])."""

    @functools.wraps(step)
    def run(*args: Any, **kwargs: Any) -> Any:
        with no_grad():
            return step(*args, **kwargs)

    return cast(F, run)


def _closure_loss(closure: Callable[[], Any] | None) -> Any:
    """Run ``closure`` with grad mode on and return its loss (None without a closure)."""
    if closure is None:
        return None
    with enable_grad():
        return closure()


def _check_lr(lr: float | Tensor) -> None:
    """PyTorch's checks of a learning rate: non-negative, a 1-element tensor if a tensor."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def _check_betas(lr: float | Tensor, betas: tuple[float, float], eps: float, weight_decay: float) -> None:
    """The checks the Adam family (Adam, Adamax, NAdam, RAdam) makes of its hyper-parameters."""
    _check_lr(lr)
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


def _check_fused(fused: bool | None, foreach: bool | None, differentiable: bool) -> None:
    """PyTorch's checks of ``fused`` against the other implementation flags."""
    if fused:
        if differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        if foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def _check_not_differentiable(group: dict[str, Any]) -> None:
    """Refuse a group asking for a recorded update (Note [Updates on arrays])."""
    if group.get("differentiable"):
        raise NotImplementedError("agrad.optim does not support differentiable=True: updates are applied to the "
                                  "parameters' arrays and are not recorded")


def _hooked(step: F) -> F:
    """Wrap a ``step`` defined by an Optimizer class with the step pre- and post-hooks
    (PyTorch's ``profile_hook_step``).  Only the wrapper of the class the object
    belongs to runs the hooks, so a ``step`` calling ``super().step()`` runs them once."""

    @functools.wraps(step)
    def wrapper(self: Optimizer, *args: Any, **kwargs: Any) -> Any:
        if getattr(type(self), "step", None) is not wrapper:
            return step(self, *args, **kwargs)
        for pre_hook in chain(_global_optimizer_pre_hooks.values(), self._optimizer_step_pre_hooks.values()):
            result = pre_hook(self, args, kwargs)
            if result is not None:
                if isinstance(result, tuple) and len(result) == 2:
                    args, kwargs = result
                else:
                    raise RuntimeError(
                        f"{step} must return None or a tuple of (new_args, new_kwargs), but got {result}.")
        out = step(self, *args, **kwargs)
        for post_hook in chain(self._optimizer_step_post_hooks.values(), _global_optimizer_post_hooks.values()):
            post_hook(self, args, kwargs)
        return out

    wrapper.hooked = True  # type: ignore[attr-defined]
    return cast(F, wrapper)


class _TrackedStep:
    """An optimizer's ``step`` that records in ``_opt_called`` that it ran (PyTorch's
    ``patch_track_step_called``): a scheduler's first ``step`` warns when it has not,
    and when ``optimizer.step`` was replaced after the scheduler was made (the
    replacement lacks ``_wrapped_by_lr_sched``).  Holds the optimizer weakly."""

    _wrapped_by_lr_sched = True

    def __init__(self, opt: Optimizer, step: Callable[..., Any]) -> None:
        self._opt = weakref.ref(opt)
        self._step = step
        functools.update_wrapper(self, step)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        opt: Optimizer | None = self._opt()
        assert opt is not None  # the optimizer holds its step
        opt._opt_called = True
        return self._step(opt, *args, **kwargs)


class Optimizer:
    """Base class for all optimizers (PyTorch's ``torch.optim.Optimizer``).

    Args:
        params: an iterable of tensors, of ``(name, tensor)`` pairs, or of dicts
            (parameter groups, each with ``"params"`` and its own options).
            Give an ordered collection: the order is how ``state_dict`` names them.
        defaults: the options a group that does not give one takes.

    Subclasses implement ``step``.

        >>> w = agrad.zeros(2, requires_grad=True)
        >>> opt = agrad.optim.SGD([w], lr=0.5)
        >>> (w - agrad.tensor([1.0, 2.0])).pow(2).sum().backward_sync()
        >>> opt.step()
        >>> w
        tensor([1., 2.], requires_grad=True)
        >>> opt.state_dict()["param_groups"][0]["params"]
        [0]
    """

    _opt_called: bool = False  # set by a scheduler's _TrackedStep

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = _hooked(cls.__dict__["step"])  # type: ignore[method-assign]

    def __init__(self, params: ParamsT, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self._optimizer_step_pre_hooks: dict[int, Callable[..., Any]] = OrderedDict()
        self._optimizer_step_post_hooks: dict[int, Callable[..., Any]] = OrderedDict()
        self._optimizer_state_dict_pre_hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()
        self._optimizer_state_dict_post_hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()
        self._optimizer_load_state_dict_post_hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            "but got " + typename(params))
        self.state: defaultdict[Any, Any] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(cast(dict[str, Any], param_group))

    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Take ``state`` (defaults, state, param_groups), filling in what an older
        state dict lacks: group options missing from it take the constructor's
        defaults (PyTorch's subclasses' ``setdefault`` calls), and scalar state
        stored as a number (``step`` in PyTorch 1.x) becomes a float32 0-d tensor."""
        self.__dict__.update(state)
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks", "_optimizer_state_dict_pre_hooks",
                     "_optimizer_state_dict_post_hooks", "_optimizer_load_state_dict_pre_hooks",
                     "_optimizer_load_state_dict_post_hooks"):
            self.__dict__.setdefault(name, OrderedDict())
        self.defaults.setdefault("differentiable", False)
        signature = inspect.signature(type(self).__init__).parameters
        for group in self.param_groups:
            for key, value in self.defaults.items():
                default = signature[key].default if key in signature else value
                group.setdefault(key, value if default is inspect.Parameter.empty else default)
            for p in group["params"]:
                p_state = self.state.get(p) or {}
                for key in _SCALAR_STATE:
                    if key in p_state and not isinstance(p_state[key], Tensor):
                        p_state[key] = _scalar_state(float(p_state[key]))

    def __repr__(self) -> str:
        format_string = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            format_string += "\n"
            format_string += f"Parameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    format_string += f"    {key}: {group[key]}\n"
        format_string += ")"
        return format_string

    def _track_step_called(self) -> None:
        """Make ``step`` record that it ran, for the learning-rate schedulers' order
        warning; once, however many schedulers ask."""
        if not hasattr(self.step, "_wrapped_by_lr_sched"):
            self.step = _TrackedStep(self, self.step.__func__)  # type: ignore[attr-defined, method-assign]

    # -- hooks -------------------------------------------------------------------------------
    def register_step_pre_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """Register ``hook(optimizer, args, kwargs) -> None or (args, kwargs)``, called before ``step``."""
        return _add_hook(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """Register ``hook(optimizer, args, kwargs) -> None``, called after ``step``."""
        return _add_hook(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook: Callable[..., Any], prepend: bool = False) -> RemovableHandle:
        """Register ``hook(optimizer) -> None``, called before ``state_dict`` builds its result."""
        return _register(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook: Callable[..., Any], prepend: bool = False) -> RemovableHandle:
        """Register ``hook(optimizer, state_dict) -> state_dict or None``, called on ``state_dict``'s result."""
        return _register(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook: Callable[..., Any], prepend: bool = False) -> RemovableHandle:
        """Register ``hook(optimizer, state_dict) -> state_dict or None``, called before loading."""
        return _register(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook: Callable[..., Any], prepend: bool = False) -> RemovableHandle:
        """Register ``hook(optimizer) -> None``, called after ``load_state_dict``."""
        return _register(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    # -- state dict --------------------------------------------------------------------------
    def state_dict(self) -> StateDict:
        """The optimizer's state: ``{"state": {index: per-parameter state}, "param_groups":
        [group options with "params" as index lists]}``, indices counting the
        parameters in group order.  Per-parameter dicts and tensors are the
        optimizer's own (not copies), as in PyTorch."""
        for pre_hook in self._optimizer_state_dict_pre_hooks.values():
            pre_hook(self)
        param_mappings: dict[int, int] = {}
        start_index = 0

        def pack_group(group: dict[str, Any]) -> dict[str, Any]:
            nonlocal start_index
            packed = {k: v for k, v in group.items() if k != "params"}
            param_mappings.update({id(p): i for i, p in enumerate(group["params"], start_index)
                                   if id(p) not in param_mappings})
            packed["params"] = [param_mappings[id(p)] for p in group["params"]]
            start_index += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(param_mappings[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        state_dict: StateDict = {"state": packed_state, "param_groups": param_groups}
        for post_hook in self._optimizer_state_dict_post_hooks.values():
            hook_result = post_hook(self, state_dict)
            if hook_result is not None:
                state_dict = hook_result
        return state_dict

    def load_state_dict(self, state_dict: StateDict) -> None:
        """Load a state dict from :meth:`state_dict` (or PyTorch's, converted).

        Groups must match in number and size.  Floating-point state tensors are
        converted to their parameter's dtype and device (``.to``, which keeps a
        tensor that already fits: the loaded dict's tensors become the state),
        ``step`` is kept as it is.
        """
        state_dict = state_dict.copy()
        for pre_hook in self._optimizer_load_state_dict_pre_hooks.values():
            hook_result = pre_hook(self, state_dict)
            if hook_result is not None:
                state_dict = hook_result
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        state: defaultdict[Any, Any] = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                state[id_map[k]] = _cast(id_map[k], v)
            else:
                state[k] = v

        def update_group(group: dict[str, Any], new_group: dict[str, Any]) -> dict[str, Any]:
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})
        for post_hook in self._optimizer_load_state_dict_post_hooks.values():
            post_hook(self)

    # -- gradients and steps -----------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter: to None (the default, which makes
        the next step skip parameters no backward reached) or to zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                    continue
                if p.grad.grad_fn is not None:
                    p.grad.detach_()
                else:
                    p.grad.requires_grad_(False)
                p.grad.zero_()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update the parameters once; ``closure`` re-evaluates the model and returns the
        loss, which ``step`` returns."""
        raise NotImplementedError

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own options (fine-tuning a layer with its
        own learning rate, unfreezing one); options it lacks take ``defaults``."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        tensors = [p[1] if isinstance(p, tuple) else p for p in param_group["params"]]
        names = [p[0] for p in param_group["params"] if isinstance(p, tuple)]
        param_group["params"] = tensors
        if names:
            if len(names) != len(tensors):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names
        for param in tensors:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + typename(param))
            if not (param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)
        _check_not_differentiable(param_group)
        if len(tensors) != len(set(tensors)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        param_set: set[Tensor] = set()
        for group in self.param_groups:
            param_set.update(group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                current = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {current} to the optimizer")
        if not param_set.isdisjoint(tensors):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)


def _register(hooks: OrderedDict[int, Callable[..., Any]], hook: Callable[..., Any], prepend: bool) -> RemovableHandle:
    """Add ``hook`` to ``hooks``, first when ``prepend``."""
    handle = _add_hook(hooks, hook)
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


# The per-parameter state PyTorch keeps as float32 0-d tensors: step counts, NAdam's
# ``mu_product`` and ASGD's ``eta`` and ``mu``.  Updates read them as Python floats,
# so their float32 rounding is part of the arithmetic, in float64 runs too.
_SCALAR_STATE = ("step", "mu_product", "eta", "mu")


def _scalar_state(value: float = 0.0) -> Tensor:
    """Scalar state as PyTorch keeps it: a float32 0-d tensor on the CPU."""
    return Tensor._make(np.array(value, dtype=np.float32))


def _cast(param: Tensor, value: Any, key: Any = None) -> Any:
    """``value`` (a loaded per-parameter state, or a piece of one) fitted to ``param``:
    floating tensors (``step`` aside) to its dtype and device, other tensors to its
    device (PyTorch's ``_process_value_according_to_param_policy``)."""
    if isinstance(value, Tensor):
        if key == "step":
            return value
        if param.is_floating_point():
            return value.to(dtype=param.dtype, device=param.device)
        return value.to(device=param.device)
    if isinstance(value, dict):
        return {k: _cast(param, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(param, v) for v in value)
    return value
