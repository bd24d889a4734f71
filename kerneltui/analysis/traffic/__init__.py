"""Bytes moved through GPU memory, FLOPs, and achieved rates per GPU event.

Rules of doc sections 6 and 10. Bytes only where the rule is right for the op, else NaN
(unknown, never zero, never a guess); "above peak" follows from exact counts only.

* memset: its own ``bytes`` (written once). memcpy: ``copy_kind`` from the event name
  ("H2D pinned", "D2H pageable", "D2D", "P2P"). A copy within the device reads and writes
  HBM (twice its size) and is rated against HBM; host copies are rated against the host
  link (``link_gbs``, ``link_share``), never against HBM.
* kernels: from the record_shapes of the op that launched them (External id = innermost
  op): ``Input Dims`` x itemsize(``Input type``). A ``TensorList`` is a nested list of
  shapes whose dtype is not recorded: it takes the op's other tensors' dtype, else unknown.
* eager elementwise ops: inputs + output (their broadcast); no broadcast: unknown. In-place
  ``_`` ops read and write self; fills and ``copy_`` write self once.
* reductions read the input and write the reduced shape; losses read their inputs and write
  the reduced value; ``nll_loss`` reads the target and one value per target, not [N, C].
* embeddings and gathers: index + indexed rows read + rows written, not the table;
  ``gather`` inside ``index_select``/``embedding`` is judged by the embedding's record.
* norms: one read of each input, one write shaped like the activation. Pooling: input +
  output (+ int64 indices); its backward: grad_output (+ indices) + a gradient of self's size.
* FLOP/s, not GB/s: GEMMs (2*M*N*K), convolutions (2*N*K*C/groups*R*S*P*Q; backward: the
  grad-input and grad-weight convolutions that output_mask asks for), attention
  (4*B*H*Lq*Lk*D forward, half when causal, 2.5x backward), Triton templates
  (``triton_tem_*``: a GEMM or convolution from their buffers' shapes).
* Inductor ops (``triton_*``) list every buffer argument once: that is the traffic, except
  that a kernel with a single buffer updates it in place (``in_out_ptr``, under-counted by
  half), so that buffer counts twice, unless it is a fill (zeros, full, the zero-initialised
  accumulator of embedding_dense_backward...), which writes it once.
* Strides, paddings, reduction dims, is_causal, output_mask and reductions are Concrete
  Inputs: rules that need them read ``shapes["concrete"]`` and are unknown without it.
* an op that launched several kernels shares its bytes and FLOPs among them by duration,
  so each kernel of the op shows the op's figures / summed kernel time.
* CUDA-graph replays have no op, so no byte count.

Modules: ``records`` reads a record; ``compute_rules`` (FLOP/s) and ``memory_rules`` hold the rules;
``ops`` picks the rule for an op; ``events`` makes the per-event table.

Shapes are parsed once per distinct (op name, record_shapes text) among the ops
that launched GPU work; everything per event is vectorised.
"""

from kerneltui.analysis.traffic.events import (
           Traffic,
           TrafficArrays,
           compute_traffic,
           copy_kind,
           traffic_arrays,
)
from kerneltui.analysis.traffic.ops import (
           BASIS,
           FLOP_BASES,
           OFF_HBM_BASES,
           OpTraffic,
           op_traffic,
)
from kerneltui.analysis.traffic.records import ITEMSIZE, short_op

__all__ = ["BASIS", "FLOP_BASES", "ITEMSIZE", "OFF_HBM_BASES", "OpTraffic", "Traffic", "TrafficArrays", "compute_traffic",
           "copy_kind", "op_traffic", "short_op", "traffic_arrays"]
