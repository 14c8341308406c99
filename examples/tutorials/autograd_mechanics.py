"""The examples of PyTorch's note "Autograd mechanics" that need no ``nn``
or ``optim``, with ``torch`` renamed ``agrad`` and ``backward()`` spelt
``backward_sync()``.  Run: ``python examples/tutorials/autograd_mechanics.py``.
"""

import os
import tempfile
import threading
import uuid

import numpy as np

import agrad

# -- requires_grad: an output requires grad if any input does ----------------
x = agrad.randn(5, 5)
y = agrad.randn(5, 5)
z = agrad.randn((5, 5), requires_grad=True)
a = x + y
b = a + z
print("requires_grad:", a.requires_grad, b.requires_grad)

# -- no-grad and inference mode ---------------------------------------------
with agrad.no_grad():
    c = z * 2
print("no_grad:", c.requires_grad)
with agrad.inference_mode():
    d = z * 2
print("inference_mode:", d.requires_grad, d.is_inference())

# -- saved tensors: what a node keeps for its backward ------------------------
x = agrad.randn(5, requires_grad=True)
y = x.pow(2)
print("saved self:", x.equal(y.grad_fn._saved_self), x is y.grad_fn._saved_self)
y = x.exp()
print("saved result:", y.equal(y.grad_fn._saved_result), y is y.grad_fn._saved_result)

# -- in-place correctness checks: version counters ----------------------------
x = agrad.randn(3, requires_grad=True)
y = x.sigmoid()
y.mul_(2)  # overwrites sigmoid's saved output
try:
    y.sum().backward_sync()
except RuntimeError as e:
    print("in-place check:", str(e).split(";")[0])

# -- multithreaded autograd: backward from several threads --------------------
results = [None] * 10


def train_fn(i):
    x = agrad.ones(5, 5, requires_grad=True)
    y = (x + 3) * (x + 4) * 0.5
    y.sum().backward_sync()
    results[i] = x.grad.sum().item()


threads = [threading.Thread(target=train_fn, args=(i,)) for i in range(10)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("threads:", results)

# -- backward hooks: when each kind runs ---------------------------------------
order = []
x = agrad.tensor([1.0, 2.0], requires_grad=True)
y = x * 3
y.register_hook(lambda g: order.append("tensor hook") or g * 2)
y.retain_grad()
y.grad_fn.register_prehook(lambda grads: order.append("node prehook") or None)
y.grad_fn.register_hook(lambda grads_in, grads_out: order.append("node hook") or None)
y.sum().backward_sync()
print("hooks:", order, y.grad.tolist(), x.grad.tolist())

# -- hooks for saved tensors: pack to disk, unpack on use ---------------------
tmp_dir = tempfile.mkdtemp()


def pack_hook(tensor):
    name = os.path.join(tmp_dir, str(uuid.uuid4()) + ".npy")
    np.save(name, tensor.detach().numpy())
    return name


def unpack_hook(name):
    return agrad.from_numpy(np.load(name))


x = agrad.randn(5, requires_grad=True)
with agrad.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
    y = x.pow(2)
print("saved to disk:", len(os.listdir(tmp_dir)), y.grad_fn._saved_self.equal(x))
y.sum().backward_sync()
print("grad from disk:", agrad.allclose(x.grad, 2 * x))

with agrad.autograd.graph.save_on_cpu():
    y = x.exp()
y.sum().backward_sync()
print("save_on_cpu:", agrad.allclose(x.grad, 2 * x + x.exp()))
