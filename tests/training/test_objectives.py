"""Tiny CPU tests for the UniMAE / GEM loss building blocks."""

import math

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from unirag.training.objectives import (
    IGNORE_INDEX,
    TinyDecoder,
    anchor_loss,
    eos_hidden,
    gem_attention_mask,
    gem_embedding,
    gem_insert,
    gem_labels,
    mar_corrupt,
    mar_loss,
    mrc_attention_mask,
    mrc_loss,
    simcse_loss,
)

PAD, BOS, EOS, MASK = 0, 1, 2, 3
V = 128


def tiny_llama(layers=2, attn="eager", seed=0):
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=V,
        max_position_embeddings=64,
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=EOS,
    )
    cfg._attn_implementation = attn
    return LlamaForCausalLM(cfg).eval()


def make_batch(lengths, N=None, seed=0):
    """Right-padded rows: BOS, random text, EOS; lengths count all real tokens."""
    g = torch.Generator().manual_seed(seed)
    N = N or max(lengths)
    ids = torch.full((len(lengths), N), PAD)
    mask = torch.zeros((len(lengths), N), dtype=torch.long)
    for b, n in enumerate(lengths):
        ids[b, :n] = torch.randint(4, V, (n,), generator=g)
        ids[b, 0], ids[b, n - 1] = BOS, EOS
        mask[b, :n] = 1
    return ids, mask


# ----------------------------------------------------------------------------- MAR


def test_mar_corrupt_keeps_eos_padding_protected_and_rate():
    ids, mask = make_batch([64] * 200 + [40] * 200, N=64)
    ids[:, 5] = 7  # a protected id in every row
    g = torch.Generator().manual_seed(0)
    out, masked = mar_corrupt(ids, mask, MASK, 0.3, protect_ids=(BOS, 7), generator=g)
    assert out.shape == ids.shape and masked.dtype == torch.bool
    assert torch.equal(out[masked], torch.full_like(out[masked], MASK))
    assert torch.equal(out[~masked], ids[~masked])
    eos_pos = mask.sum(1) - 1
    assert not masked[torch.arange(len(ids)), eos_pos].any()
    assert not masked[mask == 0].any()
    assert not masked[(ids == BOS) | (ids == 7)].any()
    candidates = (mask == 1) & (ids != BOS) & (ids != 7)
    candidates[torch.arange(len(ids)), eos_pos] = False
    rate = masked.sum().item() / candidates.sum().item()
    assert abs(rate - 0.3) < 0.02
    # same generator seed -> same corruption
    out2, _ = mar_corrupt(ids, mask, MASK, 0.3, protect_ids=(BOS, 7), generator=torch.Generator().manual_seed(0))
    assert torch.equal(out, out2)


def test_mar_corrupt_p0_is_identity():
    ids, mask = make_batch([9, 5, 7])
    out, masked = mar_corrupt(ids, mask, MASK, 0.0)
    assert torch.equal(out, ids) and not masked.any()


def test_mar_loss_matches_hf_causal_lm_loss():
    model = tiny_llama()
    ids, mask = make_batch([9, 5, 7])
    labels = ids.masked_fill(mask == 0, IGNORE_INDEX)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
    assert torch.allclose(mar_loss(out.logits, ids, mask), out.loss, atol=1e-5)


def test_eos_hidden_picks_last_real_position():
    _, mask = make_batch([6, 3, 1, 4], N=6)
    h = torch.arange(4 * 6, dtype=torch.float)[None, :, None].reshape(4, 6, 1).expand(4, 6, 5)
    out = eos_hidden(h, mask)
    assert out.shape == (4, 5)
    assert out[:, 0].tolist() == [5.0, 6 + 2.0, 12 + 0.0, 18 + 3.0]


# ----------------------------------------------------------------------------- MRC


def test_mrc_attention_mask_structure_and_density():
    _, mask = make_batch([32, 20, 7, 32] * 8, N=32)
    allowed = mrc_attention_mask(mask, 0.4, generator=torch.Generator().manual_seed(0))
    B, N = mask.shape
    assert allowed.shape == (B, N, N + 1) and allowed.dtype == torch.bool
    assert allowed[:, :, 0].all()  # h_eos always visible
    assert not torch.diagonal(allowed[:, :, 1:], dim1=1, dim2=2).any()  # never its own token
    assert not allowed[:, :, 1:][(mask == 0)[:, None, :].expand(B, N, N)].any()  # padding hidden
    eligible = mask.bool()[:, None, :] & ~torch.eye(N, dtype=torch.bool)
    density = allowed[:, :, 1:][eligible].float().mean().item()
    assert abs(density - 0.4) < 0.03
    # fresh per example: two identical rows get different patterns
    assert not torch.equal(allowed[0], allowed[3])


def test_tiny_decoder_learns_and_gradient_reaches_the_llm():
    model = tiny_llama()
    model.train()
    ids, mask = make_batch([10, 7, 4, 10], seed=1)
    dec = TinyDecoder(32, V, num_heads=4, max_positions=16)
    opt = torch.optim.Adam(list(dec.parameters()) + list(model.parameters()), lr=3e-3)

    def step_loss(seed):
        hs = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
        h = eos_hidden(hs, mask)
        emb = model.get_input_embeddings()(ids).detach()
        logits = dec(h, emb, mask, p_mrc=0.3, generator=torch.Generator().manual_seed(seed))
        assert logits.shape == (4, 10, V)
        return mrc_loss(logits, ids, mask)

    first = step_loss(0)
    first.backward()
    # gradient flows through h_eos into the LLM (all layers), not just the decoder
    assert model.model.layers[0].self_attn.q_proj.weight.grad.abs().sum() > 0
    assert model.model.norm.weight.grad.abs().sum() > 0
    opt.zero_grad()
    for s in range(25):
        loss = step_loss(s)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        last = step_loss(0)
    assert last.item() < 0.6 * first.item()


def test_tiny_decoder_tied_head_is_frozen_and_not_saved():
    model = tiny_llama()
    w = model.get_output_embeddings().weight
    dec = TinyDecoder(32, V, num_heads=4, max_positions=16, lm_head_weight=w)
    assert all(p.data_ptr() != w.data_ptr() for p in dec.parameters())
    assert dec.lm_head_weight.data_ptr() == w.data_ptr()  # tied, not copied
    assert not any("lm_head" in k for k in dec.state_dict())
    ids, mask = make_batch([6, 3])
    h = torch.randn(2, 32, requires_grad=True)
    logits = dec(h, model.get_input_embeddings()(ids).detach(), mask, p_mrc=0.5)
    mrc_loss(logits, ids, mask).backward()
    assert w.grad is None and h.grad.abs().sum() > 0


def test_mrc_loss_skips_eos_and_padding():
    _, mask = make_batch([4, 2], N=4)
    targets = torch.tensor([[5, 6, 7, EOS], [8, EOS, PAD, PAD]])
    logits = torch.full((2, 4, V), -30.0)
    for b in range(2):
        for i in range(4):
            logits[b, i, targets[b, i]] = 30.0
    logits[0, 3] = 0.0  # EOS prediction wrong -> must not count
    logits[1, 2:] = 0.0  # padding -> must not count
    assert mrc_loss(logits, targets, mask).item() < 1e-6


# ----------------------------------------------------------------------------- SimCSE


def test_simcse_loss_identical_orthogonal_is_zero_random_is_log_b():
    B = 8
    e = torch.eye(B, 16) * 3.0
    assert simcse_loss(e, e.clone()).item() < 1e-6
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(B, 4096, generator=g), torch.randn(B, 4096, generator=g)
    assert abs(simcse_loss(a, b).item() - math.log(B)) < 0.7
    assert abs(simcse_loss(a, b, temperature=1.0).item() - math.log(B)) < 0.05


# ----------------------------------------------------------------------------- GEM

SUMMARY = [120, 121, 122]


def test_gem_insert_keeps_text_and_places_summary():
    ids, mask = make_batch([10, 4, 2, 7, 10, 10], N=10, seed=3)
    k = len(SUMMARY)
    new_ids, new_mask, start = gem_insert(ids, mask, SUMMARY, generator=torch.Generator().manual_seed(0), min_prefix=2)
    assert new_ids.shape == (6, 10 + k) and new_mask.shape == (6, 10 + k) and start.dtype == torch.long
    assert torch.equal(new_mask.sum(1), mask.sum(1) + k)
    for b in range(6):
        n, s = int(mask[b].sum()), int(start[b])
        assert min(2, n - 1) <= s <= n - 1  # prefix kept, EOS still after the summary
        assert new_ids[b, s : s + k].tolist() == SUMMARY
        text = torch.cat([new_ids[b, :s], new_ids[b, s + k : n + k]])
        assert torch.equal(text, ids[b, :n])
        assert new_mask[b, : n + k].all() and not new_mask[b, n + k :].any()  # still right-padded
    assert len(set(start[[0, 4, 5]].tolist())) > 1  # positions are random


def test_gem_attention_mask_hand_case():
    # positions: 0 1 | 2 3 (summary) | 4 5(EOS) | 6 pad
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 0]])
    m = gem_attention_mask(mask, torch.tensor([2]), k=2)
    assert m.shape == (1, 1, 7, 7) and m.dtype == torch.float32
    expected = torch.tensor(
        [
            [1, 0, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0, 0],
            [1, 1, 1, 0, 0, 0, 0],  # summary 1: prefix + itself
            [1, 1, 0, 1, 0, 0, 0],  # summary 2: prefix + itself, not summary 1
            [0, 0, 1, 1, 1, 0, 0],  # after: summary + later text only
            [0, 0, 1, 1, 1, 1, 0],
            [0, 0, 1, 1, 1, 1, 1],  # padding query: never empty (sees itself)
        ],
        dtype=torch.bool,
    )
    assert torch.equal(m[0, 0] == 0, expected)
    assert (m[0, 0][~expected] == torch.finfo(torch.float32).min).all()
    assert gem_attention_mask(mask, torch.tensor([2]), k=2, dtype=torch.bfloat16).dtype == torch.bfloat16


def test_gem_labels_and_embedding():
    new_ids = torch.tensor([[5, 6, 120, 121, 7, EOS, PAD]])
    new_mask = torch.tensor([[1, 1, 1, 1, 1, 1, 0]])
    labels = gem_labels(new_ids, new_mask, torch.tensor([2]), k=2)
    assert labels.tolist() == [[5, 6, -100, -100, 7, EOS, -100]]
    h = torch.arange(7.0)[None, :, None]
    assert gem_embedding(h, torch.tensor([2]), k=2).item() == 3.0


def test_gem_mask_works_in_llama_forward():
    ids, mask = make_batch([12, 9, 6], seed=4)
    k = len(SUMMARY)
    new_ids, new_mask, start = gem_insert(ids, mask, SUMMARY, generator=torch.Generator().manual_seed(1), min_prefix=2)
    gm = gem_attention_mask(new_mask, start, k)
    labels = gem_labels(new_ids, new_mask, start, k)
    eager, sdpa = tiny_llama(attn="eager"), tiny_llama(attn="sdpa")
    with torch.no_grad():
        out_e = eager(input_ids=new_ids, attention_mask=gm, labels=labels, output_hidden_states=True)
        out_s = sdpa(input_ids=new_ids, attention_mask=gm, labels=labels)
        plain = eager(input_ids=new_ids, attention_mask=new_mask)
    real = new_mask.bool()
    assert torch.isfinite(out_e.logits).all() and torch.isfinite(out_e.loss)
    # the 4D mask is honoured the same way by eager and sdpa, and it is not the plain causal one
    assert torch.allclose(out_e.logits[real], out_s.logits[real], atol=1e-4)
    assert not torch.allclose(out_e.logits[real], plain.logits[real], atol=1e-3)
    assert gem_embedding(out_e.hidden_states[-1], start, k).shape == (3, 32)


def test_gem_mask_hides_prefix_from_later_text_in_one_layer():
    # with one layer, text after the summary sees only summary/later *embeddings*,
    # so changing a prefix token must not move its logits, while the summary's do move
    model = tiny_llama(layers=1)
    ids, mask = make_batch([10], seed=5)
    k = len(SUMMARY)
    new_ids, new_mask, start = gem_insert(ids, mask, SUMMARY, generator=torch.Generator().manual_seed(0), min_prefix=3)
    s = int(start[0])
    gm = gem_attention_mask(new_mask, start, k)
    changed = new_ids.clone()
    changed[0, 1] = (changed[0, 1] + 1 - 4) % (V - 4) + 4
    with torch.no_grad():
        a = model(input_ids=new_ids, attention_mask=gm).logits
        b = model(input_ids=changed, attention_mask=gm).logits
    assert torch.allclose(a[0, s + k :], b[0, s + k :], atol=1e-6)
    assert not torch.allclose(a[0, s : s + k], b[0, s : s + k], atol=1e-4)


def test_anchor_loss_is_zero_for_the_teacher_and_ignores_padding():
    torch.manual_seed(0)
    teacher = torch.randn(2, 5, 11)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    assert anchor_loss(teacher, teacher, mask).item() < 1e-6
    student = teacher.clone()
    student[1, 3:] = torch.randn(2, 11) * 5  # changes only padded positions
    assert anchor_loss(student, teacher, mask).item() < 1e-6
    assert anchor_loss(torch.randn(2, 5, 11), teacher, mask).item() > 0.01
