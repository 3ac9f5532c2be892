r"""Sequence Transformers (bidirectional encoder and causal language model) with URPE attention.

Built from :class:`~graph_urpe.nn.MultiheadURPEAttention`, the same core as the graph models;
only the relation ids differ (relative positions ``j - i`` here, shortest-path distances on
graphs). The ``attention`` switch (named as on the graph models; ``"ape"`` adds absolute
position embeddings to plain attention) reproduces the comparison of Luo et al., "Your Transformer May
Not be as Powerful as You Expect", NeurIPS 2022 (arXiv 2205.13401), Sec. 5.1:

* ``"none"``: no positional information at all (permutation-equivariant encoder);
* ``"ape"``: learned absolute position embeddings added to the token embeddings;
* ``"rpe"``: a learned Toeplitz bias ``B[i, j] = b_{j-i}`` inside the softmax (Eq. (2));
* ``"urpe"``: ``B`` plus the learned Toeplitz multiplier ``C[i, j] = c_{j-i}`` applied after the
  softmax, ``(softmax(QK^T/sqrt(d) + B) ⊙ C) V`` (Eq. (4)); ``C`` starts at all ones, so
  training starts from plain RPE.

Design decisions (documented choices, checked against the official fairseq code, lsj2408/URPE):

* ``B`` and ``C`` hold one scalar per head and per relative distance, **shared by all layers** by
  default as in the official code (one table each in the encoder); ``share_relations=False``
  gives every layer its own tables. ``B`` starts at ``N(0, 0.02)``, ``C`` at ones.
* Distances: one id per distance (the official ``--rel-pos-unique``/``--ur-attn-unique``),
  clipped at ``max_distance`` (default ``max_length - 1``, i.e. every distance distinct), or T5
  log buckets with ``num_buckets`` (default ``max_distance = 128`` then). Causal models see only
  ``j <= i``, so their distances are one-sided (:func:`~graph_urpe.nn.relative_position_ids`).
  The ids and the gathered ``[1, H, N, N]`` tables are computed **once per forward** and reused
  by every layer.
* Normalisation: ``norm_first=False`` (default) is the official code's layout (RoBERTa-style
  post-LN layers, ``x = LN(x + f(x))``, with a LayerNorm on the embeddings); ``norm_first=True``
  gives pre-LN layers (``x = x + f(LN(x))``) with a final LayerNorm, usually more stable for
  deeper language models.
* Initialisation: token and absolute-position embeddings ``N(0, 0.02)`` (BERT/RoBERTa, as the
  official ``apply_bert_init``); linear layers keep their own initialisation.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from graph_urpe.choices import check_at_least, check_choice
from graph_urpe.nn._dropout import Dropout
from graph_urpe.nn.relations import (
    RelationEmbedding,
    num_relative_positions,
    relative_position_ids,
)
from graph_urpe.nn.transformer_layer import Activation, TransformerLayer

__all__ = ["SequenceAttention", "SequenceTransformer", "TransformerLM", "TransformerLayer"]

#: Positional-information variants: no PE, absolute (learned), RPE (``B``), URPE (``B`` and ``C``).
SequenceAttention = Literal["none", "ape", "rpe", "urpe"]

_T5_MAX_DISTANCE = 128


class SequenceTransformer(nn.Module):
    r"""Token sequence -> contextual embeddings, with no PE, APE, RPE or URPE.

    Source: Luo et al., NeurIPS 2022 (arXiv 2205.13401), Eq. (2) (RPE) and Eq. (4) (URPE); the
    design decisions are listed in the module docstring.

    Args:
        num_tokens (int): input vocabulary size.
        embed_dim (int, optional): model width ``E``. (default: :obj:`64`)
        num_layers (int, optional): number of layers. (default: :obj:`2`)
        num_heads (int, optional): attention heads ``H``. (default: :obj:`4`)
        ffn_dim (int, optional): feed-forward width. (default: :obj:`None`, ``4 * E``)
        attention (str, optional): ``"none"``, ``"ape"``, ``"rpe"`` or ``"urpe"``.
            (default: :obj:`"urpe"`)
        max_length (int, optional): longest sequence for ``"ape"`` (longer inputs raise); for
            ``"rpe"``/``"urpe"`` it sets the default ``max_distance`` (longer inputs are fine,
            distances are clipped). (default: :obj:`512`)
        causal (bool, optional): causal self-attention (key ``j`` visible to query ``i`` only
            if ``j <= i``) with one-sided relative distances. (default: :obj:`False`)
        max_distance (int, optional): largest distinguished distance.
            (default: :obj:`None`: ``max_length - 1`` in unique mode, ``128`` with buckets)
        num_buckets (int, optional): T5 relative-position buckets instead of one id per
            distance. (default: :obj:`None`)
        share_relations (bool, optional): one ``B``/``C`` table shared by all layers (official
            code) or one per layer. (default: :obj:`True`)
        dropout (float, optional): dropout on embeddings and sublayer outputs.
            (default: :obj:`0.0`)
        attention_dropout (float, optional): dropout on attention weights. (default: :obj:`0.0`)
        activation (str, optional): ``"gelu"`` or ``"relu"``. (default: :obj:`"gelu"`)
        norm_first (bool, optional): pre-LN layers with a final LayerNorm instead of post-LN
            layers with an embedding LayerNorm. (default: :obj:`False`)

    Shapes:
        - **tokens**: ``[B, N]`` int64 in ``[0, num_tokens)``
        - **key_padding_mask**: ``[B, N]`` bool, ``True`` = padded (optional)
        - **output**: ``[B, N, E]``

    Raises:
        ValueError: for an unknown ``attention`` or bad sizes (at construction); for tokens that
            are not ``[B, N]`` integers, or ``N > max_length`` with ``"ape"`` (in forward).
    """

    def __init__(
        self,
        num_tokens: int,
        embed_dim: int = 64,
        num_layers: int = 2,
        num_heads: int = 4,
        ffn_dim: int | None = None,
        attention: SequenceAttention = "urpe",
        max_length: int = 512,
        causal: bool = False,
        max_distance: int | None = None,
        num_buckets: int | None = None,
        share_relations: bool = True,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        activation: Activation = "gelu",
        norm_first: bool = False,
    ) -> None:
        super().__init__()
        check_choice("attention", attention, SequenceAttention)
        check_at_least(1, num_tokens=num_tokens, num_layers=num_layers, max_length=max_length)
        if max_distance is None:
            max_distance = _T5_MAX_DISTANCE if num_buckets is not None else max_length - 1
        self.num_tokens = num_tokens
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.attention = attention
        self.max_length = max_length
        self.causal = causal
        self.max_distance = max_distance
        self.num_buckets = num_buckets
        self.share_relations = share_relations
        self.norm_first = norm_first

        self.embed_tokens = nn.Embedding(num_tokens, embed_dim)
        self.embed_positions = nn.Embedding(max_length, embed_dim) if attention == "ape" else None
        self.embed_norm = None if norm_first else nn.LayerNorm(embed_dim)
        self.final_norm = nn.LayerNorm(embed_dim) if norm_first else None
        self.dropout = Dropout(dropout)
        ffn_dim = 4 * embed_dim if ffn_dim is None else ffn_dim
        self.layers = nn.ModuleList(
            TransformerLayer(
                embed_dim, num_heads, ffn_dim, dropout=dropout,
                attention_dropout=attention_dropout, activation=activation,
                norm_first=norm_first,
            )
            for _ in range(num_layers)
        )
        num_tables = 1 if share_relations else num_layers
        num_rel = num_relative_positions(max_distance, causal=causal, num_buckets=num_buckets)
        self.rel_bias = (
            nn.ModuleList(
                RelationEmbedding(num_rel, num_heads, init="normal") for _ in range(num_tables)
            )
            if attention in ("rpe", "urpe")
            else None
        )
        self.rel_multiplier = (
            nn.ModuleList(
                RelationEmbedding(num_rel, num_heads, init="ones") for _ in range(num_tables)
            )
            if attention == "urpe"
            else None
        )
        self._reset_embeddings()

    def _reset_embeddings(self) -> None:
        nn.init.normal_(self.embed_tokens.weight, std=0.02)
        if self.embed_positions is not None:
            nn.init.normal_(self.embed_positions.weight, std=0.02)

    def reset_parameters(self) -> None:
        """Re-initialise embeddings, layers, norms and the ``B``/``C`` tables."""
        self._reset_embeddings()
        for layer in self.layers:
            layer.reset_parameters()
        for norm in (self.embed_norm, self.final_norm):
            if norm is not None:
                norm.reset_parameters()
        for tables in (self.rel_bias, self.rel_multiplier):
            for table in tables or ():
                table.reset_parameters()

    def relation_ids(self, length: int, device: torch.device | None = None) -> Tensor:
        """Relative-position ids ``[N, N]`` (int64) used to index ``B`` and ``C``."""
        return relative_position_ids(
            length,
            max_distance=self.max_distance,
            causal=self.causal,
            num_buckets=self.num_buckets,
            device=device,
        )

    def relation_tensors(
        self, length: int, device: torch.device | None = None
    ) -> tuple[list[Tensor | None], list[Tensor | None]]:
        """Per-layer ``B`` and ``C`` as ``[1, H, N, N]`` tensors (``None`` when unused).

        The ids are computed once and each distinct table is gathered once; with shared
        relations every layer receives the same tensor objects.
        """
        num_layers = len(self.layers)
        if self.rel_bias is None:
            return [None] * num_layers, [None] * num_layers
        ids = self.relation_ids(length, device)
        biases = [table(ids).unsqueeze(0) for table in self.rel_bias]
        mults = (
            [table(ids).unsqueeze(0) for table in self.rel_multiplier]
            if self.rel_multiplier is not None
            else [None]
        )

        def per_layer(values: list) -> list:
            return values * num_layers if len(values) == 1 else values

        return per_layer(biases), per_layer(mults)

    def forward(self, tokens: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """Encode ``tokens`` ``[B, N]`` -> ``[B, N, E]``."""
        if tokens.dim() != 2 or tokens.dtype not in (torch.int64, torch.int32):
            raise ValueError(
                f"tokens must be an integer tensor of shape [B, N], got dtype {tokens.dtype} "
                f"and shape {tuple(tokens.shape)}."
            )
        n = tokens.shape[1]
        x = self.embed_tokens(tokens)
        if self.embed_positions is not None:
            if n > self.max_length:
                raise ValueError(
                    f"sequence length {n} exceeds max_length={self.max_length} of the absolute "
                    "position embeddings; build the model with a larger max_length."
                )
            x = x + self.embed_positions(torch.arange(n, device=tokens.device))
        if self.embed_norm is not None:
            x = self.embed_norm(x)
        x = self.dropout(x)
        if key_padding_mask is not None:
            x = x.masked_fill(key_padding_mask.unsqueeze(-1), 0.0)
        biases, mults = self.relation_tensors(n, tokens.device)
        for layer, bias, mult in zip(self.layers, biases, mults):
            x = layer(
                x, attn_bias=bias, multiplier=mult, key_padding_mask=key_padding_mask,
                is_causal=self.causal,
            )
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.num_tokens}, embed_dim={self.embed_dim}, "
            f"num_layers={len(self.layers)}, num_heads={self.num_heads}, "
            f"attention={self.attention!r}, causal={self.causal}, "
            f"share_relations={self.share_relations}, norm_first={self.norm_first})"
        )


class TransformerLM(nn.Module):
    r"""Causal Transformer language model: :class:`SequenceTransformer` plus an output softmax.

    Position ``i`` predicts token ``i + 1`` from tokens ``0..i``. Two output layers:

    * full softmax (default): a linear layer to ``V`` logits whose weight is shared with the token
      embedding (``tie_weights``; Press & Wolf, EACL 2017) and whose bias starts at 0. With the
      ``N(0, 0.02)`` embeddings the untrained logits are near 0, so the untrained perplexity is
      close to ``V``;
    * adaptive softmax (``adaptive_cutoffs``; Grave et al., ICML 2017, as used by Transformer-XL
      on WikiText-103): :class:`torch.nn.AdaptiveLogSoftmaxWithLoss`, exact log-probabilities
      at a fraction of the cost for large vocabularies whose ids are sorted by decreasing
      frequency (as :class:`~graph_urpe.data.text.Vocabulary` sorts them). Not tied.

    Args:
        vocab_size (int): vocabulary size ``V``.
        tie_weights (bool, optional): tie output and input embeddings (full softmax only).
            (default: :obj:`True`)
        adaptive_cutoffs (list[int], optional): increasing cluster boundaries in ``(0, V)``
            for the adaptive softmax, e.g. ``[2000, 6000]``. (default: :obj:`None`, full softmax)
        adaptive_div_value (float, optional): width divisor between adaptive clusters.
            (default: :obj:`4.0`)
        **kwargs: passed to :class:`SequenceTransformer` (``causal`` is forced to ``True``).

    Shapes:
        - **tokens**: ``[B, N]`` int64 in ``[0, V)``
        - **forward output**: ``[B, N, V]`` scores whose ``log_softmax`` is the next-token
          log-distribution (logits; log-probabilities with the adaptive softmax)
        - **nll output**: ``[B, N]`` float32 per-token negative log-likelihood (nats), 0 where
          the target is ``ignore_index``

    Raises:
        ValueError: as :class:`SequenceTransformer`; if ``causal=False`` is passed; if
            ``tie_weights`` is combined with ``adaptive_cutoffs``.
    """

    def __init__(
        self,
        vocab_size: int,
        tie_weights: bool = True,
        adaptive_cutoffs: list[int] | None = None,
        adaptive_div_value: float = 4.0,
        **kwargs,
    ) -> None:
        super().__init__()
        if not kwargs.pop("causal", True):
            raise ValueError("TransformerLM is always causal; do not pass causal=False.")
        if adaptive_cutoffs is not None and tie_weights:
            raise ValueError(
                "tie_weights needs the full softmax: set tie_weights=False to use "
                "adaptive_cutoffs."
            )
        self.encoder = SequenceTransformer(vocab_size, causal=True, **kwargs)
        self.vocab_size = vocab_size
        self.tie_weights = tie_weights
        self.adaptive_cutoffs = adaptive_cutoffs
        embed_dim = self.encoder.embed_dim
        if adaptive_cutoffs is not None:
            self.output = nn.AdaptiveLogSoftmaxWithLoss(
                embed_dim, vocab_size, list(adaptive_cutoffs), div_value=adaptive_div_value
            )
        else:
            self.output = nn.Linear(embed_dim, vocab_size)
            if tie_weights:
                self.output.weight = self.encoder.embed_tokens.weight
        self._reset_output()

    def _reset_output(self) -> None:
        if self.adaptive_cutoffs is not None:
            self.output.reset_parameters()
            return
        if not self.tie_weights:
            nn.init.normal_(self.output.weight, std=0.02)
        nn.init.zeros_(self.output.bias)

    def reset_parameters(self) -> None:
        """Re-initialise the encoder and the output layer."""
        self.encoder.reset_parameters()
        self._reset_output()

    def forward(self, tokens: Tensor) -> Tensor:
        """Next-token scores ``[B, N, V]`` for ``tokens`` ``[B, N]`` (see Shapes)."""
        h = self.encoder(tokens)
        if self.adaptive_cutoffs is not None:
            return self.output.log_prob(h.flatten(0, 1)).view(*h.shape[:2], -1)
        return self.output(h)

    def nll(self, tokens: Tensor, targets: Tensor, ignore_index: int = -100) -> Tensor:
        """Per-token negative log-likelihood ``[B, N]`` of ``targets`` given ``tokens``.

        Raises:
            ValueError: if ``targets`` and ``tokens`` differ in shape.
        """
        if targets.shape != tokens.shape:
            raise ValueError(
                f"targets {tuple(targets.shape)} must have the shape of tokens "
                f"{tuple(tokens.shape)}."
            )
        h = self.encoder(tokens)
        if self.adaptive_cutoffs is None:
            logits = self.output(h).flatten(0, 1).float()
            nll = F.cross_entropy(
                logits, targets.flatten(), ignore_index=ignore_index, reduction="none"
            )
            return nll.view_as(targets)
        valid = targets != ignore_index
        out = torch.zeros(targets.shape, dtype=torch.float32, device=h.device)
        log_prob = self.output(h[valid], targets[valid]).output
        return out.masked_scatter(valid, -log_prob.float())

    def __repr__(self) -> str:
        head = (
            f"adaptive_cutoffs={self.adaptive_cutoffs}"
            if self.adaptive_cutoffs is not None
            else f"tie_weights={self.tie_weights}"
        )
        return f"{self.__class__.__name__}({self.vocab_size}, {head}, encoder={self.encoder!r})"
