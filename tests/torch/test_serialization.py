"""torch.save / torch.load of neuron tensors and modules (map_location too)."""
import io

import torch


def test_save_load_tensor(tmp_path):
    x = torch.randn(3, 4).to("neuron")
    p = tmp_path / "t.pt"
    torch.save(x, p)
    y = torch.load(p)
    assert y.device.type == "neuron"
    torch.testing.assert_close(y.cpu(), x.cpu())
    z = torch.load(p, map_location="cpu")
    assert z.device.type == "cpu"
    torch.testing.assert_close(z, x.cpu())


def test_save_load_module_map_location():
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf, map_location="neuron")
    assert all(v.device.type == "neuron" for v in sd.values())
    m2 = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to("neuron")
    m2.load_state_dict(sd)
    x = torch.randn(5, 4)
    torch.testing.assert_close(m2(x.to("neuron")).cpu(), m(x), rtol=1e-5, atol=1e-5)
    buf2 = io.BytesIO()
    torch.save(m2, buf2)
    buf2.seek(0)
    m3 = torch.load(buf2, weights_only=False)
    assert next(m3.parameters()).device.type == "neuron"
    buf2.seek(0)
    m4 = torch.load(buf2, weights_only=False, map_location="cpu")
    assert next(m4.parameters()).device.type == "cpu"


def test_storage_and_views_share_on_load(tmp_path):
    x = torch.arange(10.0).to("neuron")
    pair = {"a": x, "b": x[2:5]}
    p = tmp_path / "v.pt"
    torch.save(pair, p)
    q = torch.load(p)
    q["b"].fill_(-1)
    assert q["a"].cpu().tolist()[2:5] == [-1.0, -1.0, -1.0]
