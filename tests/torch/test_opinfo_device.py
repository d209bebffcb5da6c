"""PyTorch's device-generic OpInfo machinery on 'neuron': instantiate_device_type_tests
adds the PrivateUse1 test base for the device (torch.neuron.is_available()), and the
@ops decorator runs each test over the OpInfos of
torch.testing._internal.common_methods_invocations.op_db that the OpInfo sweep found
native (opinfo_native.txt, float32). The tests follow test_ops.py's TestCommon:
  - every sample against the CPU (not only the sweep's first four),
  - each sample made non-contiguous against the contiguous one,
  - the out= variant against the functional one,
  - the method and in-place variants against the function,
  - the gradients of the samples against the CPU's (ops that support autograd),
all in strict mode: a CPU fallback fails the test. Counts:
  bash tests/torch/run.sh tests/torch/test_opinfo_device.py
By default (the suite, CI) the tests run over the OpInfos of the ops issue 15 item 4
names (ITEM4 below, those of them in opinfo_native.txt); NEURON_OPINFO_ALL=1 runs them
over every op of opinfo_native.txt (about 600 ops, five tests each: a long run on a
shared host), NEURON_OPINFO_OPS=a,b over the ops named.
"""
import os

import torch
from torch.testing._internal.common_device_type import instantiate_device_type_tests, ops
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase, noncontiguous_like

HERE = os.path.dirname(os.path.abspath(__file__))
RTOL, ATOL = 1e-3, 1e-3
# Values are random or uninitialised: only shapes and dtypes compare.
from opinfo_sweep import UNCHECKED_VALUES, full_name, random_sample  # noqa: E402


# The OpInfos of the ops of issue 15 item 4.
ITEM4 = {
    "sin", "cos", "cumsum", "sort", "topk", "log1p", "floor", "ceil", "round", "round.decimals_0",
    "round.decimals_3", "round.decimals_neg_3", "nn.functional.leaky_relu", "nn.functional.softplus",
    "nn.functional.hardtanh", "nn.functional.mse_loss", "nn.functional.binary_cross_entropy",
    "nn.functional.binary_cross_entropy_with_logits", "nn.functional.smooth_l1_loss", "prod", "mv", "dot",
    "nn.functional.adaptive_avg_pool1d", "nn.functional.adaptive_avg_pool2d", "nn.functional.adaptive_max_pool1d",
    "nn.functional.adaptive_max_pool2d", "nn.functional.max_pool1d", "nn.functional.max_pool3d",
    "nn.functional.interpolate.nearest", "nn.functional.interpolate.bilinear", "nn.functional.upsample_nearest",
    "nn.functional.upsample_bilinear", "masked_select", "scatter_reduce.sum", "scatter_reduce.prod",
    "scatter_reduce.mean", "scatter_reduce.amax", "scatter_reduce.amin", "nn.functional.embedding_bag",
    "nn.functional.batch_norm", "nn.functional.scaled_dot_product_attention",
}


# Samples left out, with the reason (what is not native yet).
SKIP_SAMPLE = {
    # max_norm renormalises the weight rows in place: aten::embedding_renorm_ has no
    # neuron kernel yet (CPU fallback; the sweep's first 4 samples do not use it).
    "nn.functional.embedding_bag": lambda s: s.kwargs.get("max_norm") is not None,
}


def samples(op, device, dtype, **kw):
    skip = SKIP_SAMPLE.get(full_name(op), lambda s: False)
    return [s for s in op.sample_inputs(device, dtype, **kw) if not skip(s)]


def native_ops():
    names = [ln.strip() for ln in open(os.path.join(HERE, "opinfo_native.txt")) if ln.strip() and ln[0] != "#"]
    only = os.environ.get("NEURON_OPINFO_OPS")
    if only:
        names = [n for n in names if n in only.split(",")]
    elif os.environ.get("NEURON_OPINFO_ALL") != "1":
        names = [n for n in names if n in ITEM4]
    return set(names)


NATIVE = native_ops()
SUPPORTED = [op for op in op_db if full_name(op) in NATIVE and torch.float32 in op.supported_dtypes("cpu")]


def flat(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in flat(y)]
    return [x]


class TestNeuronOpInfo(TestCase):
    def setUp(self):
        super().setUp()
        torch.ops.neuron.set_fallback_strict(True)

    def tearDown(self):
        torch.ops.neuron.set_fallback_strict(False)
        super().tearDown()

    def assertSameResult(self, got, want, name, values=True):
        g, w = flat(got), flat(want)
        self.assertEqual(len(g), len(w))
        for a, b in zip(g, w):
            if not isinstance(b, torch.Tensor):
                if isinstance(b, float):
                    self.assertEqual(a, b, rtol=RTOL, atol=ATOL)
                continue
            self.assertEqual(a.shape, b.shape)
            self.assertEqual(a.dtype, b.dtype)
            if not values or name in UNCHECKED_VALUES or b.layout != torch.strided:
                continue
            torch.testing.assert_close(a.detach().cpu(), b.detach().cpu(), rtol=RTOL, atol=ATOL, equal_nan=True,
                                       check_device=False, check_stride=False)

    @ops(SUPPORTED, allowed_dtypes=(torch.float32,))
    def test_compare_cpu(self, device, dtype, op):
        for sample in samples(op, device, dtype):
            cpu = sample.transform(lambda t: t.detach().cpu() if isinstance(t, torch.Tensor) else t)
            try:
                want = op(cpu.input, *cpu.args, **cpu.kwargs)
            except Exception:
                continue  # the CPU rejects the sample
            got = op(sample.input, *sample.args, **sample.kwargs)
            self.assertSameResult(got, want, full_name(op), not random_sample(full_name(op), sample))

    @ops(SUPPORTED, allowed_dtypes=(torch.float32,))
    def test_noncontiguous_samples(self, device, dtype, op):
        for sample in samples(op, device, dtype):
            nc = sample.noncontiguous()
            want = op(sample.input, *sample.args, **sample.kwargs)
            got = op(nc.input, *nc.args, **nc.kwargs)
            self.assertSameResult(got, want, full_name(op), not random_sample(full_name(op), sample))

    @ops([op for op in SUPPORTED if op.supports_out], allowed_dtypes=(torch.float32,))
    def test_out(self, device, dtype, op):
        for sample in samples(op, device, dtype):
            want = op(sample.input, *sample.args, **sample.kwargs)
            if not isinstance(want, torch.Tensor):
                continue
            out = torch.empty_like(want)
            got = op(sample.input, *sample.args, out=out, **sample.kwargs)
            self.assertIs(got, out)
            self.assertSameResult(out, want, full_name(op), not random_sample(full_name(op), sample))

    @ops(SUPPORTED, allowed_dtypes=(torch.float32,))
    def test_variant_consistency(self, device, dtype, op):
        method, inplace = op.method_variant, op.inplace_variant
        for sample in samples(op, device, dtype):
            want = op(sample.input, *sample.args, **sample.kwargs)
            if method is not None and isinstance(sample.input, torch.Tensor):
                self.assertSameResult(method(sample.input, *sample.args, **sample.kwargs), want, full_name(op),
                                      not random_sample(full_name(op), sample))
            if (inplace is not None and isinstance(want, torch.Tensor) and isinstance(sample.input, torch.Tensor)
                    and want.dtype == sample.input.dtype and want.shape == sample.input.shape):
                x = sample.input.clone()
                inplace(x, *sample.args, **sample.kwargs)
                self.assertSameResult(x, want, full_name(op), not random_sample(full_name(op), sample))

    @ops([op for op in SUPPORTED if op.supports_autograd], allowed_dtypes=(torch.float32,))
    def test_grad_compare_cpu(self, device, dtype, op):
        for sample in samples(op, device, dtype, requires_grad=True):
            outs = [t for t in flat(op(sample.input, *sample.args, **sample.kwargs))
                    if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]
            if not outs or random_sample(full_name(op), sample):
                continue
            inputs = [t for t in flat([sample.input, list(sample.args), list(sample.kwargs.values())])
                      if isinstance(t, torch.Tensor) and t.requires_grad]
            cpu_in = [t.detach().cpu().requires_grad_(True) for t in inputs]
            cpu = sample.transform(lambda t: cpu_in[[id(x) for x in inputs].index(id(t))]
                                   if any(t is x for x in inputs) else (t.cpu() if isinstance(t, torch.Tensor) else t))
            cpu_outs = [t for t in flat(op(cpu.input, *cpu.args, **cpu.kwargs))
                        if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]
            weights = [torch.randn(o.shape) for o in cpu_outs]
            g_cpu = torch.autograd.grad([(o * w).sum() for o, w in zip(cpu_outs, weights)], cpu_in, allow_unused=True)
            g_dev = torch.autograd.grad([(o * w.to(device)).sum() for o, w in zip(outs, weights)], inputs,
                                        allow_unused=True)
            for a, b in zip(g_dev, g_cpu):
                if a is None or b is None:
                    self.assertEqual(a is None, b is None)
                    continue
                torch.testing.assert_close(a.cpu(), b, rtol=1e-2, atol=1e-2, equal_nan=True)


instantiate_device_type_tests(TestNeuronOpInfo, globals(), only_for="privateuse1")
