// The lean step (lean_step.py, LeanStep._python_hidden) for one generated token, in C++.
//
// Why: per layer the Python step runs about forty PyTorch operations, most of them on a few
// hundred numbers, where each call's Python and dispatch cost more than its arithmetic. Here the
// kernels that do real work are still ATen's (the quantized matmuls, the attention's matrix
// products, softmax, SiLU and the sum inside RMSNorm) and the elementwise rest (RMSNorm's scaling,
// RoPE, the bf16 roundings, the KV cache writes, the residual adds) are plain loops, in the Python
// step's order and dtypes. Built without floating-point contraction (native_step.py), every
// product and sum rounds as ATen's does (a fused multiply-add only where ATen's kernel fuses
// one), so the hidden states are the Python step's bit for bit (tests/test_native_step.py).
#include <torch/extension.h>

#include <cmath>
#include <vector>

namespace {

using bf16 = c10::BFloat16;

// One quantized weight matrix, as quantized_decode.Int4Rows or Int8Rows holds it.
struct Rows {
  at::Tensor weight;  // int4: packed uint8 [out, in / 2]; int8: int8 [out, in]
  at::Tensor scales;  // int4: bf16 [in / group, out, 2]; int8: bf16 [out]
  bool int4;

  at::Tensor matmul(const at::Tensor& rows, int64_t group) const {  // rows: bf16 (1, in)
    return int4 ? at::_weight_int4pack_mm_for_cpu(rows, weight, group, scales)
                : at::_weight_int8pack_mm(rows, weight, scales);
  }
};

struct Layer {
  at::Tensor input_norm, post_norm;  // fp32 weights
  double input_eps, post_eps;
  Rows qkv, o, gate_up, down;
};

class Step {
 public:
  Step(at::Tensor embed, at::Tensor norm, double norm_eps, int64_t heads, int64_t kv_heads,
       int64_t head_dim, double scaling, int64_t group)
      : embed_(embed), norm_(norm), norm_eps_(norm_eps), heads_(heads), kv_heads_(kv_heads),
        head_dim_(head_dim), scaling_(scaling), group_(group) {
    TORCH_CHECK(embed.scalar_type() == at::kFloat && norm.scalar_type() == at::kFloat && embed.is_contiguous()
                    && norm.is_contiguous(), "the native step takes a contiguous fp32 embedding and final norm");
    const int64_t hidden = embed.size(1);
    squares_ = at::empty({1, hidden}, at::kFloat);
    normed_ = at::empty({1, hidden}, at::kBFloat16);
    queries_ = at::empty({heads, head_dim}, at::kFloat);
  }

  void add_layer(at::Tensor input_norm, double input_eps, at::Tensor post_norm, double post_eps,
                 std::vector<at::Tensor> qkv, bool qkv_int4, std::vector<at::Tensor> o, bool o_int4,
                 std::vector<at::Tensor> gate_up, bool gate_up_int4, std::vector<at::Tensor> down,
                 bool down_int4) {
    TORCH_CHECK(input_norm.scalar_type() == at::kFloat && post_norm.scalar_type() == at::kFloat
                    && input_norm.is_contiguous() && post_norm.is_contiguous(),
                "the native step takes contiguous fp32 norm weights");
    layers_.push_back(Layer{input_norm, post_norm, input_eps, post_eps, Rows{qkv[0], qkv[1], qkv_int4},
                            Rows{o[0], o[1], o_int4}, Rows{gate_up[0], gate_up[1], gate_up_int4},
                            Rows{down[0], down[1], down_int4}});
  }

  // The final norm's output (1, 1, hidden) for `token` at `position`, whose keys and values it
  // writes into `keys` / `values` (layers, kv_heads, capacity, head_dim; fp32). `cos` and `sin`
  // are the position's rotation (head_dim,), sin with its first half negated (lean_step.py).
  at::Tensor hidden(int64_t token, int64_t position, at::Tensor keys, at::Tensor values,
                    at::Tensor cos, at::Tensor sin) {
    TORCH_CHECK(keys.is_contiguous() && values.is_contiguous() && keys.scalar_type() == at::kFloat
                    && values.scalar_type() == at::kFloat && position < keys.size(2),
                "the KV cache must be contiguous fp32 with room for the position");
    TORCH_CHECK(cos.is_contiguous() && sin.is_contiguous() && cos.scalar_type() == at::kFloat
                    && sin.scalar_type() == at::kFloat, "the rotation must be contiguous fp32");
    const int64_t d = head_dim_, half = d / 2, rotated = heads_ + kv_heads_;
    const int64_t hidden = embed_.size(1), capacity = keys.size(2);
    at::Tensor residual = embed_.select(0, token).view({1, hidden}).clone();
    float* x = residual.data_ptr<float>();
    const float* c = cos.data_ptr<float>();
    const float* s = sin.data_ptr<float>();
    float* queries = queries_.data_ptr<float>();
    bf16* normed = normed_.data_ptr<bf16>();
    for (size_t index = 0; index < layers_.size(); ++index) {
      const Layer& layer = layers_[index];
      at::Tensor layer_keys = keys.select(0, index), layer_values = values.select(0, index);
      float* cached_keys = layer_keys.data_ptr<float>();
      float* cached_values = layer_values.data_ptr<float>();

      // attention: q, k, v from one matmul; RoPE in fp32 on q and k, rounded to bf16 as SDPA
      // reads them; the new keys and values written at the position
      rms_norm(x, layer.input_norm, layer.input_eps, normed);
      at::Tensor qkv = layer.qkv.matmul(normed_, group_);  // bf16 (1, (heads + 2 kv_heads) * d)
      const bf16* projected = qkv.data_ptr<bf16>();
      for (int64_t head = 0; head < rotated; ++head) {
        const bf16* row = projected + head * d;
        float* out = head < heads_ ? queries + head * d
                                   : cached_keys + ((head - heads_) * capacity + position) * d;
        for (int64_t i = 0; i < d; ++i) {
          // rotate_half(q) * sin == (q's halves swapped) * (sin, first half negated); addcmul
          // adds that product with one rounding, a fused multiply-add
          const float swapped = static_cast<float>(row[i < half ? i + half : i - half]);
          const float rotated_value = std::fma(swapped, s[i], static_cast<float>(row[i]) * c[i]);
          out[i] = static_cast<float>(bf16(rotated_value));
        }
      }
      for (int64_t head = 0; head < kv_heads_; ++head) {
        const bf16* row = projected + (rotated + head) * d;
        float* out = cached_values + (head * capacity + position) * d;
        for (int64_t i = 0; i < d; ++i) out[i] = static_cast<float>(row[i]);
      }
      // lean_step.one_query_attention over the filled positions
      at::Tensor filled_keys = layer_keys.slice(1, 0, position + 1);
      at::Tensor filled_values = layer_values.slice(1, 0, position + 1);
      at::Tensor grouped = queries_.view({kv_heads_, -1, d});
      at::Tensor scores = at::matmul(grouped, filled_keys.transpose(1, 2)).mul_(scaling_);
      at::Tensor attended = at::matmul(scores.softmax(-1), filled_values).view({1, -1}).to(at::kBFloat16);
      add_into(x, layer.o.matmul(attended, group_));

      // SiLU-gated MLP: gate and up from one matmul
      rms_norm(x, layer.post_norm, layer.post_eps, normed);
      std::vector<at::Tensor> gate_up = layer.gate_up.matmul(normed_, group_).chunk(2, -1);
      add_into(x, layer.down.matmul(at::silu(gate_up[0]) * gate_up[1], group_));
    }
    at::Tensor out = at::empty({1, 1, hidden}, at::kFloat);
    rms_norm(x, norm_, norm_eps_, out.data_ptr<float>());
    return out;
  }

 private:
  // F.rms_norm as ATen computes it for fp32: (x * rsqrt(sum(x * x) / n + eps)) * weight, the sum
  // by ATen's own reduction (its summation order), the result written as Out (bf16: the matmul's
  // input, rounded as .to(bfloat16) rounds)
  template <typename Out>
  void rms_norm(const float* x, const at::Tensor& weight, double eps, Out* out) {
    const int64_t n = weight.size(0);
    float* squares = squares_.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) squares[i] = x[i] * x[i];
    const float mean = squares_.sum(-1).item<float>() / static_cast<float>(n);
    const float scale = 1.0f / std::sqrt(mean + static_cast<float>(eps));
    const float* w = weight.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) out[i] = Out((x[i] * scale) * w[i]);
  }

  // the residual stream (fp32) plus a layer's bf16 output, as x + out promotes it
  static void add_into(float* x, const at::Tensor& out) {
    const bf16* values = out.data_ptr<bf16>();
    for (int64_t i = 0; i < out.numel(); ++i) x[i] = x[i] + static_cast<float>(values[i]);
  }

  at::Tensor embed_, norm_;
  double norm_eps_;
  int64_t heads_, kv_heads_, head_dim_;
  double scaling_;
  int64_t group_;
  std::vector<Layer> layers_;
  at::Tensor squares_, normed_, queries_;  // scratch, reused by every token (steps are serialised)
};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  pybind11::class_<Step>(m, "Step")
      .def(pybind11::init<at::Tensor, at::Tensor, double, int64_t, int64_t, int64_t, double, int64_t>())
      .def("add_layer", &Step::add_layer)
      .def("hidden", &Step::hidden, pybind11::call_guard<pybind11::gil_scoped_release>());
}
