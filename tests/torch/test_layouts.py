"""Nothing a user types kills the process (issue 15 item 7): complex tensors,
conjugate and negative views, sparse layouts, nested tensors and forward-mode AD
either work (compared with the CPU) or raise an error that names what is not
supported. Each case runs in a fresh interpreter, so a crash fails its test
instead of the suite."""
import textwrap

import pytest

from conftest import run_python

PRELUDE = """
import torch, warnings
warnings.filterwarnings("ignore")
D = "neuron"
def same(a, b, **kw):
    torch.testing.assert_close(a.cpu() if hasattr(a, "cpu") else a, b, **kw)
torch.manual_seed(0)
"""


def run_case(body, timeout=180):
    r = run_python(PRELUDE + textwrap.dedent(body) + "\nprint('CASE-OK')", timeout=timeout)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert "CASE-OK" in r.stdout, r.stdout + r.stderr


def raises_naming(expr, *words):
    """Code asserting that expr raises an error whose message names every word."""
    return f"""
try:
    {expr}
except (RuntimeError, NotImplementedError, TypeError, ValueError) as e:
    msg = str(e).lower()
    assert all(w in msg for w in {list(words)!r}), msg
else:
    raise AssertionError("no error from: " + {expr!r})
"""


def test_hfft_does_not_recurse_to_death():
    # The case that used to end the interpreter with SIGSEGV.
    run_case("""
        x = torch.randn(5, 6, 7)
        same(torch.fft.hfft(x.to(D), n=10, dim=1), torch.fft.hfft(x, n=10, dim=1), rtol=1e-4, atol=1e-4)
        same(torch.fft.rfft(x.to(D)), torch.fft.rfft(x), rtol=1e-4, atol=1e-4)
        same(torch.fft.ifft(torch.fft.fft(x.to(D))).real, x, rtol=1e-4, atol=1e-4)
    """)


def test_complex_tensors_work():
    run_case("""
        a = torch.randn(4, 3, dtype=torch.complex64)
        b = torch.randn(4, 3, dtype=torch.complex64)
        da, db = a.to(D), b.to(D)
        assert da.device.type == D and da.dtype == torch.complex64
        same(da, a)
        same(da + db, a + b); same(da * db, a * b); same(da.abs(), a.abs())
        same(da.t().contiguous(), a.t().contiguous())        # strided complex copy on the device
        same(da.t().cpu(), a.t())                             # strided device-to-host
        same(torch.view_as_real(da), torch.view_as_real(a))
        same(da.real, a.real); same(da.imag, a.imag)
        same(da @ db.t(), a @ b.t(), rtol=1e-5, atol=1e-5)
        same(torch.complex(da.real, da.imag), a)
        same(torch.randn(3, dtype=torch.complex64, device=D).shape, torch.Size([3]))
        t = torch.zeros(3, 4, dtype=torch.complex64, device=D)
        t[:, 1] = torch.tensor([1j, 2, 3 + 1j])              # strided host-to-device
        ref = torch.zeros(3, 4, dtype=torch.complex64); ref[:, 1] = torch.tensor([1j, 2, 3 + 1j])
        same(t, ref)
    """)


def test_conjugate_views():
    run_case("""
        a = torch.randn(4, 3, dtype=torch.complex64)
        da = a.to(D)
        c = da.conj()
        assert c.is_conj()
        same(c, a.conj())                  # device-to-host of a conjugate view
        same(c.clone(), a.conj())          # device copy keeps the bit
        same(c.resolve_conj(), a.conj())
        same(c + 1, a.conj() + 1)
        same(c * da, a.conj() * a)
        h = torch.empty(4, 3, dtype=torch.complex64, device=D)
        h.copy_(a.conj())                  # host conjugate view into a device tensor
        same(h, a.conj())
        d2 = torch.empty(4, 3, dtype=torch.complex64, device=D).conj()
        d2.copy_(a)                        # into a device conjugate view
        same(d2, a)
        same(d2.resolve_conj(), a)
    """)


def test_negative_views():
    run_case("""
        x = torch.randn(5, 4)
        n = torch._neg_view(x.to(D))
        assert n.is_neg()
        same(n, -x); same(n.clone(), -x); same(n + 1, -x + 1); same(n.resolve_neg(), -x)
        same(n.t().contiguous(), (-x).t())
        z = torch._neg_view(torch.randn(3, dtype=torch.complex64).to(D)).conj()
        same(z.resolve_neg().resolve_conj().cpu(), z.cpu())
    """)


def test_sparse_layouts_raise_clearly():
    run_case(raises_naming("torch.randn(3, 4, device=D).to_sparse()", "sparse", "neuron")
             + raises_naming("torch.randn(3, 4, device=D).to_sparse_csr()", "sparse", "neuron")
             + raises_naming("torch.randn(3, 4).to_sparse().to(D)", "sparse", "neuron")
             + raises_naming("torch.sparse_coo_tensor([[0, 1], [1, 0]], [1., 2.], (2, 2), device=D)", "sparse")
             + raises_naming("torch.empty(2, 2, layout=torch.sparse_coo, device=D)", "sparse"))


def test_nested_tensors():
    # A strided nested tensor can be made on the device, but every op on it raises
    # an error naming the layout; the jagged layout works.
    run_case(raises_naming("torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], device=D).sin()",
                           "nested", "neuron")
             + raises_naming("torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], device=D) + 1",
                             "nested", "neuron") + """
a, b = torch.randn(2, 3), torch.randn(4, 3)
nt = torch.nested.nested_tensor([a, b], layout=torch.jagged, device=D)
parts = (nt.sin() * 2).unbind()
same(parts[0], a.sin() * 2); same(parts[1], b.sin() * 2)
""")


def test_forward_mode_ad():
    run_case("""
        import torch.autograd.forward_ad as fwAD
        p, t = torch.randn(4, 5), torch.randn(4, 5)
        def f(x):
            return (x.sin() * 2 + x.cumsum(1)).softmax(-1).sum(0)
        with fwAD.dual_level():
            ref = fwAD.unpack_dual(f(fwAD.make_dual(p, t))).tangent
            got = fwAD.unpack_dual(f(fwAD.make_dual(p.to(D), t.to(D)))).tangent
        same(got, ref, rtol=1e-4, atol=1e-5)
        out = torch.func.jvp(f, (p.to(D),), (t.to(D),))[1]
        same(out, ref, rtol=1e-4, atol=1e-5)
    """)


def test_index_add_on_0d_matches_cpu():
    run_case("""
        for alpha in (1, 3):
            s, src = torch.tensor(1.5), torch.tensor(2.0)
            ref = s.index_add(0, torch.tensor([0]), src, alpha=alpha)
            got = s.to(D).index_add(0, torch.tensor([0], device=D), src.to(D), alpha=alpha)
            assert got.shape == ref.shape
            same(got, ref)
        # what the CPU rejects, the device rejects too (and the stream stays usable)
        for ix, src in (([0, 0], [1.0, 2.0]), ([1], [1.0])):
            try:
                torch.tensor(0.0).index_add(0, torch.tensor(ix), torch.tensor(src))
                cpu_ok = True
            except (RuntimeError, IndexError):
                cpu_ok = False
            try:
                torch.tensor(0.0, device=D).index_add(0, torch.tensor(ix, device=D), torch.tensor(src, device=D))
                torch.neuron.synchronize()
                dev_ok = True
            except (RuntimeError, IndexError):
                dev_ok = False
            assert cpu_ok == dev_ok, (ix, src, cpu_ok, dev_ok)
        same(torch.ones(2, device=D) * 2, torch.ones(2) * 2)
    """)
