"""The Module: parameters, buffers and submodules registered by attribute (mirrors ``torch.nn.Module``).

A Module holds three ordered registries — ``_parameters``, ``_buffers``,
``_modules`` — filled by assigning attributes (``self.fc = Linear(2, 3)``,
``self.w = Parameter(...)``) or by the ``register_*`` methods.  Everything
else (``parameters()``, ``state_dict()``, ``to()``, ``train()``, ``repr``)
walks them.  Names, order, keys, hooks and error messages are PyTorch's.

Note [Async forward]
~~~~~~~~~~~~~~~~~~~~
``forward`` may be ``async def``.  Calling such a module returns a coroutine
that runs the forward pre-hooks, awaits ``forward`` and then runs the
forward hooks, so ``await model(x)`` is the async form of ``model(x)`` with
the same hook order.  Whether the call is async is decided by
``inspect.iscoroutinefunction(self.forward)`` at each call (a subclass or an
instance may replace ``forward``).  Hooks are always plain functions: they
run on the event loop between awaits and must not block.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import warnings
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from agrad import _ambient, _dtype
from agrad._backends import canonical
from agrad._creation import typename
from agrad._grad_mode import no_grad
from agrad._graph._hooks import RemovableHandle, _add_hook
from agrad._tensor import Tensor
from agrad.nn.modules._backward_hook import BackwardHook
from agrad.nn.parameter import Parameter, _MarkedBuffer

__all__ = ["Module"]

T = TypeVar("T", bound="Module")


# Note [Loading is all or nothing]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's ``load_state_dict`` copies each entry as it checks it and raises
# at the end, leaving a model half loaded when a checkpoint does not fit.
# agrad checks every entry first: ``_load_from_state_dict`` stages its copies
# in ``_ambient.staged_state_dict_copies`` while ``load_state_dict`` runs, and they are applied
# only when no error was found.  Same errors, same messages; on failure the
# model is as it was.  (A copy that itself fails while applying, which the
# checks rule out for tensors of the right shape, raises PyTorch's "While
# copying the parameter named ..." error.)  Called on its own, outside
# ``load_state_dict``, ``_load_from_state_dict`` copies at once.


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns (PyTorch's ``_IncompatibleKeys``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(s: str, num_spaces: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join(num_spaces * " " + line for line in lines)


def _check_name(kind: str, name: Any) -> None:
    """PyTorch's checks of a name given to ``register_parameter``/``register_buffer``/``add_module``."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {typename(name)}")
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain "."' + (f", got: {name}" if kind == "module" else ""))
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')


class Module:
    """Base class for all neural network modules; subclass it and define ``forward``.

        >>> class Affine(agrad.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.scale = agrad.nn.Parameter(agrad.ones(2))
        ...     def forward(self, x):
        ...         return x * self.scale
        >>> m = Affine()
        >>> m(agrad.tensor([1.0, 2.0]))
        tensor([1., 2.], grad_fn=<MulBackward0>)
        >>> list(m.state_dict())
        ['scale']

    ``forward`` may be ``async def``; then ``await m(x)`` (Note [Async forward]).
    """

    __module__ = "agrad.nn"

    dump_patches: bool = False
    _version: int = 1
    training: bool
    _parameters: dict[str, Parameter | None]
    _buffers: dict[str, Tensor | None]
    _non_persistent_buffers_set: set[str]
    _modules: dict[str, "Module | None"]
    call_super_init: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if self.call_super_init is False and bool(kwargs):
            raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword argument "
                            f"'{next(iter(kwargs))}'")
        if self.call_super_init is False and bool(args):
            raise TypeError(f"{type(self).__name__}.__init__() takes 1 positional argument but {len(args) + 1} "
                            "were given")
        setattr_ = object.__setattr__
        setattr_(self, "training", True)
        setattr_(self, "_parameters", {})
        setattr_(self, "_buffers", {})
        setattr_(self, "_non_persistent_buffers_set", set())
        setattr_(self, "_modules", {})
        setattr_(self, "_forward_pre_hooks", OrderedDict())
        setattr_(self, "_forward_pre_hooks_with_kwargs", {})
        setattr_(self, "_forward_hooks", OrderedDict())
        setattr_(self, "_forward_hooks_with_kwargs", {})
        setattr_(self, "_forward_hooks_always_called", {})
        setattr_(self, "_backward_pre_hooks", OrderedDict())
        setattr_(self, "_backward_hooks", OrderedDict())
        setattr_(self, "_state_dict_pre_hooks", OrderedDict())
        setattr_(self, "_state_dict_hooks", OrderedDict())
        setattr_(self, "_load_state_dict_pre_hooks", OrderedDict())
        setattr_(self, "_load_state_dict_post_hooks", OrderedDict())
        if self.call_super_init:
            super().__init__(*args, **kwargs)

    # -- forward -------------------------------------------------------------
    def forward(self, *input: Any) -> Any:
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def _run_pre_hooks(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        for hook_id, hook in list(self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if isinstance(result, tuple) and len(result) == 2:
                        args, kwargs = result
                    else:
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           f"but got {result}.")
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        return args, kwargs

    def _run_hooks(self, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any, called: set[int]) -> Any:
        for hook_id, hook in list(self._forward_hooks.items()):
            if hook_id in self._forward_hooks_always_called:
                called.add(hook_id)
            if hook_id in self._forward_hooks_with_kwargs:
                hook_result = hook(self, args, kwargs, result)
            else:
                hook_result = hook(self, args, result)
            if hook_result is not None:
                result = hook_result
        return result

    def _call_always_hooks(self, args: tuple[Any, ...], kwargs: dict[str, Any], called: set[int]) -> None:
        """When a pre-hook, ``forward`` or a forward hook raised, the hooks registered with
        ``always_call=True`` that have not run yet still run, each on its own: one that raises
        too is reported as a warning and the others still run (the first error propagates)."""
        result = None
        for hook_id, hook in list(self._forward_hooks.items()):
            if hook_id not in self._forward_hooks_always_called or hook_id in called:
                continue
            try:
                if hook_id in self._forward_hooks_with_kwargs:
                    hook_result = hook(self, args, kwargs, result)
                else:
                    hook_result = hook(self, args, result)
                if hook_result is not None:
                    result = hook_result
            except Exception as e:
                warnings.warn("module forward hook with ``always_call=True`` raised an exception that was "
                              f"silenced as another error was raised in forward: {e}", stacklevel=3)

    def _before_forward(self, args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any], BackwardHook | None]:
        """The forward pre-hooks, then the inputs' side of the backward hooks (``_backward_hook``)."""
        args, kwargs = self._run_pre_hooks(args, kwargs)
        bw_hook = None
        if self._backward_hooks or self._backward_pre_hooks:
            bw_hook = BackwardHook(self, list(self._backward_hooks.values()), list(self._backward_pre_hooks.values()))
            args = bw_hook.setup_input_hook(args)
        return args, kwargs, bw_hook

    def _after_forward(self, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any,
                       bw_hook: BackwardHook | None, called: set[int]) -> Any:
        result = self._run_hooks(args, kwargs, result, called)
        if bw_hook is not None:
            if not isinstance(result, (Tensor, tuple)):
                warnings.warn("For backward hooks to be called, module output should be a Tensor or a tuple of "
                              f"Tensors but received {type(result)}", stacklevel=3)
            else:
                result = bw_hook.setup_output_hook(result)
        return result

    def _call_impl(self, *args: Any, **kwargs: Any) -> Any:
        forward = self.forward
        if inspect.iscoroutinefunction(forward):
            return self._call_async(forward, args, kwargs)
        if not (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks or self._backward_pre_hooks):
            return forward(*args, **kwargs)
        called: set[int] = set()
        try:
            args, kwargs, bw_hook = self._before_forward(args, kwargs)
            return self._after_forward(args, kwargs, forward(*args, **kwargs), bw_hook, called)
        except Exception:
            self._call_always_hooks(args, kwargs, called)
            raise

    async def _call_async(self, forward: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Note [Async forward]."""
        called: set[int] = set()
        try:
            args, kwargs, bw_hook = self._before_forward(args, kwargs)
            return self._after_forward(args, kwargs, await forward(*args, **kwargs), bw_hook, called)
        except Exception:
            self._call_always_hooks(args, kwargs, called)
            raise

    __call__: Callable[..., Any] = _call_impl

    # -- hooks ---------------------------------------------------------------
    def register_forward_pre_hook(self, hook: Callable[..., Any], *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """``hook(module, args) -> None | new args`` (or ``hook(module, args, kwargs) -> None | (args, kwargs)``
        with ``with_kwargs=True``), called before ``forward``."""
        handle = _add_hook(self._forward_pre_hooks, hook)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return _ModuleHookHandle(handle, self._forward_pre_hooks_with_kwargs)

    def register_forward_hook(self, hook: Callable[..., Any], *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """``hook(module, args, output) -> None | new output`` (``hook(module, args, kwargs, output)`` with
        ``with_kwargs=True``), called after ``forward``; with ``always_call=True`` also when it raises."""
        handle = _add_hook(self._forward_hooks, hook)
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return _ModuleHookHandle(handle, self._forward_hooks_with_kwargs, self._forward_hooks_always_called)

    def register_full_backward_pre_hook(self, hook: Callable[..., Any], prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_output) -> None | new grad_output``, called when the gradients of the
        module's outputs are known, before its inputs' (``_backward_hook``)."""
        handle = _add_hook(self._backward_pre_hooks, hook)
        if prepend:
            self._backward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook: Callable[..., Any], prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_input, grad_output) -> None | new grad_input``, called when the gradients
        of the module's inputs are known (``_backward_hook``); ``grad_input`` has one entry per
        positional argument, None where it is not a tensor that requires grad."""
        handle = _add_hook(self._backward_hooks, hook)
        if prepend:
            self._backward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_state_dict_pre_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """``hook(module, prefix, keep_vars)``, called before ``state_dict`` collects this module's entries."""
        return _add_hook(self._state_dict_pre_hooks, hook)

    def register_state_dict_post_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata)``, called after this module's entries are in."""
        return _add_hook(self._state_dict_hooks, hook)

    def register_load_state_dict_pre_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs)``, called before this module loads its entries."""
        return _add_hook(self._load_state_dict_pre_hooks, _WithModule(hook, self))

    def register_load_state_dict_post_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """``hook(module, incompatible_keys)``, called after ``load_state_dict``; it may edit the key lists."""
        return _add_hook(self._load_state_dict_post_hooks, hook)

    # -- registration ----------------------------------------------------------
    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer (state that is not a parameter, such as BatchNorm's running mean);
        ``persistent=False`` leaves it out of ``state_dict``."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name("buffer", name)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{typename(tensor)}' object to buffer '{name}' "
                            "(agrad Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (``None`` registers the name with no parameter, as an optional bias)."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name("parameter", name)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{typename(param)}' object to parameter '{name}' "
                            "(agrad.nn.Parameter or None required)")
        if param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be created "
                f"explicitly. To express '{name}' as a function of another Tensor, compute the value in "
                "the forward() method.")
        self._parameters[name] = param

    def add_module(self, name: str, module: "Module | None") -> None:
        """Add a child module, reachable as the attribute ``name``."""
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{typename(module)} is not a Module subclass")
        _check_name("module", name)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> "Module":
        """The submodule at the dotted path ``target`` (``""`` is this module)."""
        if target == "":
            return self
        mod: Module = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def set_submodule(self, target: str, module: "Module", strict: bool = False) -> None:
        """Set the submodule at the dotted path ``target`` (its parent must exist); with
        ``strict``, only replace an existing one."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and not hasattr(parent, name):
            raise AttributeError(parent._get_name() + " has no attribute `" + name + "`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError("`" + name + "` is not an nn.Module")
        setattr(parent, name, module)

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at the dotted path ``target``."""
        module_path, _, param_name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, param_name):
            raise AttributeError(mod._get_name() + " has no attribute `" + param_name + "`")
        param = getattr(mod, param_name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + param_name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at the dotted path ``target``."""
        module_path, _, buffer_name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, buffer_name):
            raise AttributeError(mod._get_name() + " has no attribute `" + buffer_name + "`")
        if buffer_name not in mod._buffers:
            raise AttributeError("`" + buffer_name + "` is not a buffer")
        return getattr(mod, buffer_name)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        if "_parameters" in d and name in d["_parameters"]:
            return d["_parameters"][name]
        if "_buffers" in d and name in d["_buffers"]:
            return d["_buffers"][name]
        if "_modules" in d and name in d["_modules"]:
            return d["_modules"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        def remove_from(*dicts_or_sets: Any) -> None:
            for d in dicts_or_sets:
                if name in d:
                    if isinstance(d, dict):
                        del d[name]
                    else:
                        d.discard(name)

        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(self.__dict__, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{typename(value)}' as parameter '{name}' "
                                "(agrad.nn.Parameter or None expected)")
            self.register_parameter(name, value)
            return
        modules = self.__dict__.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            remove_from(self.__dict__, self._parameters, self._buffers, self._non_persistent_buffers_set)
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{typename(value)}' as child module '{name}' "
                                "(agrad.nn.Module or None expected)")
            modules[name] = value
            return
        buffers = self.__dict__.get("_buffers")
        if isinstance(value, _MarkedBuffer):
            if buffers is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            self._register_assigned_buffer(name, value, value._persistent)
            return
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{typename(value)}' as buffer '{name}' "
                                "(agrad.nn.Buffer, agrad.Tensor or None expected)")
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def _register_assigned_buffer(self, name: str, value: Tensor, persistent: bool) -> None:
        """``self.name = Buffer(t)``: ``register_buffer`` (which refuses a name held by another
        attribute), without ``persistent`` when a subclass overrides it without that argument."""
        if "persistent" in inspect.signature(self.register_buffer).parameters:
            self.register_buffer(name, value, persistent)
        elif not persistent:
            raise RuntimeError("Registering a non-persistent buffer on a Module subclass that implements "
                               "register_buffer() without the persistent argument is not allowed.")
        else:
            self.register_buffer(name, value)

    def __delattr__(self, name: str) -> None:
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        attrs = list(dir(type(self))) + list(self.__dict__)
        keys = attrs + list(self._parameters) + list(self._modules) + list(self._buffers)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    # -- walking -------------------------------------------------------------
    def _named_members(self, get_members: Callable[["Module"], Any], prefix: str = "", recurse: bool = True,
                       remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
        memo: set[int] = set()
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse
                   else [(prefix, self)])
        for module_prefix, module in modules:
            for k, v in get_members(module):
                if v is None or id(v) in memo:
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield module_prefix + ("." if module_prefix else "") + k, v

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """This module's parameters (and its submodules' with ``recurse``), each once."""
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)`` pairs, in registration order, submodules depth first."""
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def children(self) -> Iterator["Module"]:
        for _, module in self.named_children():
            yield module

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        memo: set[int] = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in memo:
                memo.add(id(module))
                yield name, module

    def modules(self) -> Iterator["Module"]:
        for _, module in self.named_modules():
            yield module

    def named_modules(self, memo: set[Any] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, "Module"]]:
        """``(dotted name, module)`` for this module (name ``prefix``) and every submodule, each once."""
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            submodule_prefix = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, submodule_prefix, remove_duplicate)

    # -- modes and gradients ---------------------------------------------------
    def train(self: T, mode: bool = True) -> T:
        """Set training mode on this module and its submodules (Dropout, BatchNorm read it)."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self: T) -> T:
        return self.train(False)

    def requires_grad_(self: T, requires_grad: bool = True) -> T:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's ``.grad``: to None (the default) or to zeros in place."""
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    grad = p.grad
                    if grad.grad_fn is not None:
                        grad.detach_()
                    else:
                        grad.requires_grad_(False)
                    grad.zero_()

    def apply(self: T, fn: Callable[["Module"], None]) -> T:
        """Call ``fn`` on every submodule (children first) and then on this module."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # -- conversions -----------------------------------------------------------
    def _apply(self: T, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> T:
        """Replace every parameter's and buffer's data by ``fn`` of it, keeping the Parameter
        objects (so an optimizer built before ``to()`` still holds them), gradients too."""
        if recurse:
            for module in self.children():
                module._apply(fn)
        for param in self._parameters.values():
            if param is None:
                continue
            with no_grad():
                applied = fn(param)
            param.data = applied
            if param.grad is not None:
                with no_grad():
                    param.grad.data = fn(param.grad)
        for key, buf in self._buffers.items():
            if buf is not None:
                self._buffers[key] = fn(buf)
        return self

    def to(self: T, *args: Any, **kwargs: Any) -> T:
        """Move and/or cast parameters and buffers: ``to(device)``, ``to(dtype)``, ``to(tensor)``,
        ``to(device, dtype)``.  Only floating-point tensors change dtype, as in PyTorch."""
        device, dtype = _parse_to(*args, **kwargs)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired "
                            f"dtype={dtype}")

        def convert(t: Tensor) -> Tensor:
            return t.to(device=device, dtype=dtype if t.is_floating_point() else None)

        return self._apply(convert)

    def _cast(self: T, dtype: _dtype.dtype) -> T:
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def float(self: T) -> T:
        return self._cast(_dtype.float32)

    def double(self: T) -> T:
        return self._cast(_dtype.float64)

    def half(self: T) -> T:
        return self._cast(_dtype.float16)

    def bfloat16(self: T) -> T:
        return self._cast(_dtype.bfloat16)

    def type(self: T, dst_type: Any) -> T:
        return self._apply(lambda t: t.type(dst_type))

    def cpu(self: T) -> T:
        return self._apply(lambda t: t.cpu())

    def cuda(self: T, device: Any = None) -> T:
        return self._apply(lambda t: t.cuda(device))

    def share_memory(self: T) -> T:
        return self  # one process: memory is shared already

    # -- state dict ------------------------------------------------------------
    def _save_to_state_dict(self, destination: dict[str, Any], prefix: str, keep_vars: bool) -> None:
        """Put this module's own parameters and persistent buffers (not its submodules') into ``destination``."""
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else buf.detach()
        if _overrides(self, "get_extra_state"):
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def get_extra_state(self) -> Any:
        """Extra (picklable) state to save in ``state_dict`` as ``<prefix>_extra_state``; a module
        that overrides it overrides ``set_extra_state`` to load it back."""
        raise RuntimeError("Module.get_extra_state() is called only when a subclass overrides it")

    def set_extra_state(self, state: Any) -> None:
        """Load what ``get_extra_state`` saved (see there)."""
        raise RuntimeError("Module.set_extra_state() is called only when a subclass overrides it")

    def state_dict(self, *args: Any, destination: Any = None, prefix: str = "", keep_vars: bool = False) -> Any:
        """An ordered dict of every parameter and persistent buffer by dotted name, detached
        (sharing memory with the module's) unless ``keep_vars``."""
        if args:
            raise TypeError("state_dict() takes keyword arguments only (destination, prefix, keep_vars); "
                            "positional arguments were removed in PyTorch")
        if destination is None:
            destination = OrderedDict()
            # PyTorch's per-module versions, an attribute of the dict (its instance dict: an
            # OrderedDict has one), as PyTorch's loaders look for it.
            destination.__dict__["_metadata"] = OrderedDict()
        local_metadata = {"version": self._version}
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            if hook(self, destination, prefix, local_metadata) is not None:
                raise RuntimeError("state_dict post-hook must return None")
        return destination

    def _load_from_state_dict(self, state_dict: Mapping[str, Any], prefix: str, local_metadata: dict[str, Any],
                              strict: bool, missing_keys: list[str], unexpected_keys: list[str],
                              error_msgs: list[str]) -> None:
        """Load this module's own entries from ``state_dict`` (PyTorch's rules and messages);
        a subclass overrides it to read older layouts (``local_metadata["version"]``)."""
        assign = local_metadata.get("assign_to_params_buffers", False)
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        persistent_buffers = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(), persistent_buffers.items())
                       if v is not None}
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            input_param = state_dict[key]
            if not isinstance(input_param, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected agrad.Tensor or Tensor-like '
                                  f"object from checkpoint but received {type(input_param)}")
                continue
            if input_param.shape != param.shape:
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {input_param.shape} from "
                                  f"checkpoint, the shape in current model is {param.shape}.")
                continue
            _stage(functools.partial(self._copy_in, name, param, input_param, key, assign))
        extra_state_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        if _overrides(self, "set_extra_state"):
            if extra_state_key in state_dict:
                _stage(functools.partial(self.set_extra_state, state_dict[extra_state_key]))
            elif strict:
                missing_keys.append(extra_state_key)
        elif strict and extra_state_key in state_dict:
            unexpected_keys.append(extra_state_key)
        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key != extra_state_key:
                    input_name = key[len(prefix):].split(".", 1)
                    if len(input_name) > 1:  # a submodule's key: it must name a child
                        if input_name[0] not in self._modules:
                            unexpected_keys.append(key)
                    elif input_name[0] not in local_state:
                        unexpected_keys.append(key)

    def _copy_in(self, name: str, param: Tensor, input_param: Tensor, key: str, assign: bool) -> None:
        """Load one checked entry: copy into ``param`` in place, or with ``assign`` make it the attribute."""
        try:
            with no_grad():
                if assign:
                    if isinstance(param, Parameter) and not isinstance(input_param, Parameter):
                        setattr(self, name, Parameter(input_param, requires_grad=param.requires_grad))
                    else:
                        setattr(self, name, input_param)
                else:
                    param.copy_(input_param)
        except Exception as ex:
            raise RuntimeError(f'While copying the parameter named "{key}", whose dimensions in the model are '
                               f"{param.size()} and whose dimensions in the checkpoint are {input_param.size()}, "
                               f"an exception occurred : {ex.args}.") from ex

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False) -> _IncompatibleKeys:
        """Copy parameters and buffers from ``state_dict`` (by dotted name) into this module.

        With ``strict`` (the default) missing and unexpected keys are errors;
        mis-shaped entries always are.  Raises PyTorch's ``RuntimeError``
        listing every problem, after copying the entries that fit (as
        PyTorch does).  Returns ``(missing_keys, unexpected_keys)``.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys: list[str] = []
        unexpected_keys: list[str] = []
        error_msgs: list[str] = []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        staged: list[Callable[[], None]] = []
        token = _ambient.staged_state_dict_copies.set(staged)
        try:
            _load_tree(self, state_dict, "", metadata, assign, _IncompatibleKeys(missing_keys, unexpected_keys),
                       error_msgs)
        finally:
            _ambient.staged_state_dict_copies.reset(token)
        if strict:
            if unexpected_keys:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected_keys)))
            if missing_keys:
                error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing_keys)))
        if error_msgs:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(error_msgs)))
        for copy_in in staged:
            copy_in()
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    # -- printing --------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The text between the parentheses of this module's repr; layers override it."""
        return ""

    def __repr__(self) -> str:
        extra_lines: list[str] = []
        extra_repr = self.extra_repr()
        if extra_repr:
            extra_lines = extra_repr.split("\n")
        child_lines = []
        for key, module in self._modules.items():
            mod_str = _addindent(repr(module), 2)
            child_lines.append("(" + key + "): " + mod_str)
        lines = extra_lines + child_lines
        main_str = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main_str += extra_lines[0]
            else:
                main_str += "\n  " + "\n  ".join(lines) + "\n"
        return main_str + ")"


_EXTRA_STATE_KEY_SUFFIX = "_extra_state"


def _overrides(module: Module, method: str) -> bool:
    """Whether ``module``'s class overrides ``Module``'s ``method`` (``get_extra_state``/``set_extra_state``)."""
    return getattr(type(module), method) is not getattr(Module, method)


def _stage(copy_in: Callable[[], None]) -> None:
    """Run ``copy_in`` now, or after every check when ``load_state_dict`` stages (Note [Loading is all or nothing])."""
    staged = _ambient.staged_state_dict_copies.get()
    if staged is None:
        copy_in()
    else:
        staged.append(copy_in)


def _load_tree(module: Module, state_dict: Mapping[str, Any], prefix: str, metadata: Mapping[str, Any] | None,
               assign: bool, incompatible: _IncompatibleKeys, error_msgs: list[str]) -> None:
    """``load_state_dict``'s walk: ``module``'s own entries, its children's, then its post-hooks."""
    local_metadata = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
    if assign:
        local_metadata["assign_to_params_buffers"] = assign
    module._load_from_state_dict(state_dict, prefix, local_metadata, True, incompatible.missing_keys,
                                 incompatible.unexpected_keys, error_msgs)
    for name, child in module._modules.items():
        if child is not None:
            child_prefix = prefix + name + "."
            child_state_dict = {k: v for k, v in state_dict.items() if k.startswith(child_prefix)}
            _load_tree(child, child_state_dict, child_prefix, metadata, assign, incompatible, error_msgs)
    for hook in module._load_state_dict_post_hooks.values():
        if hook(module, incompatible) is not None:
            raise RuntimeError("Hooks registered with ``register_load_state_dict_post_hook`` are not expected to "
                               "return new values, if incompatible_keys need to be modified, it should be done "
                               "inplace.")


class _WithModule:
    """``hook`` called with its module first, holding the module weakly (PyTorch's
    ``_WrappedHook``): a strong reference, stored in the module, would be a cycle."""

    def __init__(self, hook: Callable[..., Any], module: Module) -> None:
        self.hook = hook
        self.module = weakref.ref(module)

    def __call__(self, *args: Any) -> Any:
        module = self.module()
        if module is None:
            raise RuntimeError("You are trying to call the hook of a dead Module!")
        return self.hook(module, *args)

    def __getstate__(self) -> dict[str, Any]:
        return {"hook": self.hook, "module": self.module()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.hook = state["hook"]
        self.module = weakref.ref(state["module"])


class _ModuleHookHandle(RemovableHandle):
    """A forward hook's handle: removing it also drops its ``with_kwargs``/``always_call`` flags."""

    __module__ = "agrad.utils.hooks"
    __slots__ = ("_extra",)

    def __init__(self, handle: RemovableHandle, *extra: dict[int, Any]) -> None:
        self._hooks = handle._hooks
        self.id = handle.id
        self._extra = extra

    def remove(self) -> None:
        super().remove()
        for d in self._extra:
            d.pop(self.id, None)


def _parse_to(*args: Any, device: Any = None, dtype: Any = None, non_blocking: bool = False,
              memory_format: Any = None, copy: bool = False) -> tuple[Any, _dtype.dtype | None]:
    """``(device, dtype)`` from ``Module.to``'s overloads (PyTorch's ``torch._C._nn._parse_to``):
    ``to(tensor, non_blocking)``, ``to(dtype, non_blocking)``, ``to(device, dtype, non_blocking)``."""
    if copy:
        raise RuntimeError(".to() does not accept copy argument")
    rest = list(args)
    if rest and isinstance(rest[0], Tensor):
        device, dtype = rest[0].device, rest.pop(0).dtype
    elif rest and _is_dtype(rest[0]):
        dtype = rest.pop(0)
    elif rest:
        device = rest.pop(0)
        if rest:
            dtype = rest.pop(0)
    device_ok = device is None or isinstance(device, (str, int)) and not isinstance(device, bool) \
        or hasattr(device, "type")
    if (len(rest) > 1 or (rest and not isinstance(rest[0], bool)) or not device_ok
            or not (dtype is None or _is_dtype(dtype))):
        raise TypeError("to() received an invalid combination of arguments - got "
                        f"({', '.join(type(a).__name__ for a in args)})")
    return (None if device is None else canonical(device)), (None if dtype is None else _dtype.to_dtype(dtype))


def _is_dtype(a: Any) -> bool:
    return isinstance(a, _dtype.dtype) or (isinstance(a, type) and a is not str)
