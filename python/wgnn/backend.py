"""wgnn as an ONNX backend (onnx.backend.base.Backend), so that ONNX's
backend test suite and other code written against that interface run
through wgnn:

    import wgnn.backend
    rep = wgnn.backend.prepare(model)       # an onnx.ModelProto, bytes or a file name
    outputs = rep.run([x])                  # inputs in the graph's order

The device argument is accepted as "CPU" or "GPU" (wgnn runs on its own
device either way, like onnxruntime.backend with its default provider).
Errors are wgnn's exceptions: wgnn.Unsupported for an op, dtype or opset
wgnn does not implement.
"""
from onnx import ModelProto
from onnx.backend.base import Backend, BackendRep

from . import InferenceSession, SessionOptions


class WgnnBackendRep(BackendRep):
    def __init__(self, session):
        self.session = session
        self._inputs = [i.name for i in session.get_inputs()]

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            feed = dict(inputs)
        else:
            if not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            if len(inputs) > len(self._inputs):
                raise ValueError(f"{len(inputs)} inputs given; the model has {len(self._inputs)}")
            feed = dict(zip(self._inputs, inputs))
        return self.session.run(None, feed)


class WgnnBackend(Backend):
    @classmethod
    def is_compatible(cls, model, device="CPU", **kwargs):
        return cls.supports_device(device)

    @classmethod
    def supports_device(cls, device):
        return str(device).split(":")[0].upper() in ("CPU", "GPU")

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        if not cls.supports_device(device):
            raise ValueError(f"device {device!r}: wgnn.backend takes 'CPU' or 'GPU'")
        options = SessionOptions()
        for k, v in kwargs.items():
            if not hasattr(options, k):
                raise TypeError(f"prepare: unknown option {k!r} (wgnn.SessionOptions has no such attribute)")
            setattr(options, k, v)
        if isinstance(model, ModelProto):
            model = model.SerializeToString()
        return WgnnBackendRep(InferenceSession(model, options))

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
        raise NotImplementedError("wgnn.backend runs models (prepare / run_model), not single nodes")


is_compatible = WgnnBackend.is_compatible
prepare = WgnnBackend.prepare
run_model = WgnnBackend.run_model
run_node = WgnnBackend.run_node
supports_device = WgnnBackend.supports_device
