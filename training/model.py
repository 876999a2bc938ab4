"""Pre-norm Transformer encoder-decoder (Vaswani et al. with layer norm before each block, as
in the deep-encoder recipes), shared source/target/output embeddings for a joint vocabulary,
sinusoidal positions laid out exactly as CTranslate2 computes them.

Every weight has a one-to-one CTranslate2 counterpart (see training/export.py)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from training.config import ModelConf
from training.vocab import PAD


def sinusoidal_table(num_positions: int, dim: int) -> torch.Tensor:
    """(num_positions, dim): [sin | cos] halves, timescales 10000^(i/(dim/2-1)), first
    position = 1 (CTranslate2's SinusoidalPositionEncoder, the OpenNMT-tf convention)."""
    half = dim // 2
    increment = math.log(10000.0) / (half - 1)
    inv = torch.exp(torch.arange(half, dtype=torch.float64) * -increment)
    pos = torch.arange(1, num_positions + 1, dtype=torch.float64)[:, None]
    scaled = pos * inv[None, :]
    return torch.cat([torch.sin(scaled), torch.cos(scaled)], dim=1).float()


class Attention(nn.Module):
    def __init__(self, d_model: int, heads: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.head_dim = d_model // heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).transpose(1, 2)

    def project_kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of `x` in one matmul (the weights stay two Linears: the
        checkpoint's names and CTranslate2's export are unchanged)."""
        k, v = F.linear(x, torch.cat([self.k_proj.weight, self.v_proj.weight]),
                        torch.cat([self.k_proj.bias, self.v_proj.bias])).chunk(2, dim=-1)
        return self.split(k), self.split(v)

    def project_qkv(self, x: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Self-attention's queries, keys and values in one matmul (fused QKV)."""
        weight = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
        bias = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
        q, k, v = F.linear(x, weight, bias).chunk(3, dim=-1)
        return self.split(q), self.split(k), self.split(v)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               mask: torch.Tensor | None = None, causal: bool = False) -> torch.Tensor:
        """Attention of split queries `q` over keys `k` and values `v`, then the output
        projection."""
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=causal,
            dropout_p=self.dropout if self.training else 0.0,
        )
        b, _, t, _ = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, t, -1))

    def query(self, x: torch.Tensor) -> torch.Tensor:
        return self.split(self.q_proj(x))


class FeedForward(nn.Module):
    def __init__(self, d_model: int, ffn_dim: int, dropout: float):
        super().__init__()
        self.fc1 = nn.Linear(d_model, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(F.relu(self.fc1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, c: ModelConf):
        super().__init__()
        self.self_attn_norm = nn.LayerNorm(c.d_model)
        self.self_attn = Attention(c.d_model, c.heads, c.attention_dropout)
        self.ffn_norm = nn.LayerNorm(c.d_model)
        self.ffn = FeedForward(c.d_model, c.ffn_dim, c.activation_dropout)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self.self_attn.project_qkv(self.self_attn_norm(x))
        x = x + self.dropout(self.self_attn.attend(q, k, v, mask=mask))
        return x + self.dropout(self.ffn(self.ffn_norm(x)))


class DecoderLayer(nn.Module):
    def __init__(self, c: ModelConf):
        super().__init__()
        self.self_attn_norm = nn.LayerNorm(c.d_model)
        self.self_attn = Attention(c.d_model, c.heads, c.attention_dropout)
        self.cross_attn_norm = nn.LayerNorm(c.d_model)
        self.cross_attn = Attention(c.d_model, c.heads, c.attention_dropout)
        self.ffn_norm = nn.LayerNorm(c.d_model)
        self.ffn = FeedForward(c.d_model, c.ffn_dim, c.activation_dropout)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x: torch.Tensor, mem_kv: tuple[torch.Tensor, torch.Tensor],
                mem_mask: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        q, k, v = self.self_attn.project_qkv(self.self_attn_norm(x))
        if cache is None:  # training / teacher forcing: the whole prefix at once
            a = self.self_attn.attend(q, k, v, causal=True)
        else:  # incremental: one new position, keys/values of earlier ones cached
            if "k" in cache:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
            a = self.self_attn.attend(q, k, v)
        x = x + self.dropout(a)
        q = self.cross_attn.query(self.cross_attn_norm(x))
        x = x + self.dropout(self.cross_attn.attend(q, mem_kv[0], mem_kv[1], mask=mem_mask))
        return x + self.dropout(self.ffn(self.ffn_norm(x)))


class Transformer(nn.Module):
    def __init__(self, conf: ModelConf, vocab_size: int):
        super().__init__()
        self.conf = conf
        self.vocab_size = vocab_size
        self.embed = nn.Embedding(vocab_size, conf.d_model, padding_idx=PAD)
        self.embed_scale = math.sqrt(conf.d_model)
        self.register_buffer("positions", sinusoidal_table(conf.max_positions, conf.d_model),
                             persistent=False)
        self.dropout = nn.Dropout(conf.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(conf) for _ in range(conf.encoder_layers))
        self.encoder_norm = nn.LayerNorm(conf.d_model)
        self.decoder_layers = nn.ModuleList(DecoderLayer(conf) for _ in range(conf.decoder_layers))
        self.decoder_norm = nn.LayerNorm(conf.d_model)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "norm" in name:
                nn.init.ones_(p)
            elif name == "embed.weight":
                nn.init.normal_(p, mean=0.0, std=self.conf.d_model ** -0.5)
                with torch.no_grad():
                    p[PAD].zero_()
            else:
                nn.init.xavier_uniform_(p)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    # -- pieces ---------------------------------------------------------------------------
    def embed_tokens(self, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        t = tokens.shape[1]
        if offset + t > self.conf.max_positions:
            raise ValueError(f"sequence of {offset + t} tokens exceeds max_positions "
                             f"{self.conf.max_positions}")
        x = self.embed(tokens) * self.embed_scale + self.positions[offset:offset + t]
        return self.dropout(x)

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Memory (B, S, D) and the key mask (B, 1, 1, S), True where a real token is."""
        mask = (src != PAD)[:, None, None, :]
        x = self.embed_tokens(src)
        for layer in self.encoder_layers:
            x = layer(x, mask)
        return self.encoder_norm(x), mask

    def memory_kv(self, memory: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [layer.cross_attn.project_kv(memory) for layer in self.decoder_layers]

    def output_logits(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(self.decoder_norm(h), self.embed.weight)

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor,
               mem_mask: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(tgt_in)
        for layer, kv in zip(self.decoder_layers, self.memory_kv(memory), strict=True):
            x = layer(x, kv, mem_mask)
        return self.output_logits(x)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        memory, mask = self.encode(src)
        return self.decode(tgt_in, memory, mask)

    # -- incremental decoding -------------------------------------------------------------
    def start_state(self, src: torch.Tensor) -> dict:
        memory, mask = self.encode(src)
        return {"mem_kv": self.memory_kv(memory), "mask": mask,
                "caches": [{} for _ in self.decoder_layers], "step": 0}

    def step(self, tokens: torch.Tensor, state: dict) -> torch.Tensor:
        """Log-probabilities (B, V) of the next token after `tokens` (B,) at state['step']."""
        x = self.embed_tokens(tokens[:, None], offset=state["step"])
        layers = zip(self.decoder_layers, state["mem_kv"], state["caches"], strict=True)
        for layer, kv, cache in layers:
            x = layer(x, kv, state["mask"], cache=cache)
        state["step"] += 1
        return F.log_softmax(self.output_logits(x[:, -1]).float(), dim=-1)

    @staticmethod
    def reorder_state(state: dict, index: torch.Tensor) -> dict:
        state["mem_kv"] = [(k.index_select(0, index), v.index_select(0, index))
                           for k, v in state["mem_kv"]]
        state["mask"] = state["mask"].index_select(0, index)
        for cache in state["caches"]:
            for key in list(cache):
                cache[key] = cache[key].index_select(0, index)
        return state


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor,
                        smoothing: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed label-smoothed cross-entropy and summed plain NLL over non-pad targets."""
    lprobs = F.log_softmax(logits.reshape(-1, logits.shape[-1]).float(), dim=-1)
    tgt = target.reshape(-1)
    # Masked sums instead of copying the kept rows of the tokens x vocab matrix; masked_fill
    # (not a multiply by the mask) so a non-finite pad row cannot leak in as 0 * inf = nan.
    nll = F.nll_loss(lprobs, tgt, ignore_index=PAD, reduction="sum")
    smooth = -lprobs.sum(dim=-1).masked_fill(tgt == PAD, 0.0).sum()
    # The same definition as torch's cross_entropy(label_smoothing=...): the smoothing mass
    # is spread uniformly over the whole vocabulary.
    loss = (1.0 - smoothing) * nll + (smoothing / lprobs.shape[-1]) * smooth
    return loss, nll.detach()
