"""``space._base_rows`` builds the structural rows as arrays; property: it yields exactly the rows, in
exactly the order, of the nested loops it replaced (kept here as the reference, written from the rules
of the module docstring), over random models, batches, GPU counts and fixed dimensions."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commcost.analyses.plan.space import SearchSpace, _base_rows, _divisors, count_upper_bound, enumerate_space
from commcost.workload.transformer import model_spec, model_spec_names

NAMES = ("W", "t", "p", "v", "c", "e", "d", "b", "uneven", "etp")


def _allowed(space, key, values):
    v = space.fix(key)
    return [x for x in values if x == v] if v is not None else list(values)


def _expert_tps(space, t, d, c, e):
    default = t if (d * c) % e == 0 else 1
    values = [default] + ([1] if default != 1 and e > 1 else [])
    fixed = space.fix("etp")
    if fixed is not None:
        values = [fixed] if (t * d * c) % (e * fixed) == 0 else []
    return values


def loop_rows(space, world, moe_overlap="none"):
    """The reference: one Python row at a time, loops ``t, p, c, e, b, v, t_e``."""
    spec, s, B, G = space.spec, space.seq, space.global_batch, space.gpus_per_node
    Lr, n_q, n_kv, E = spec.layers, spec.heads, spec.n_kv, spec.experts
    rows = []
    for t in _allowed(space, "tp", _divisors(world)):
        if (space.fix("tp") is None and t > G) or n_q % t or (n_kv % t and t % n_kv):
            continue
        for p in _allowed(space, "pp", _divisors(world // t)):
            if p > Lr:
                continue
            for c in _allowed(space, "cp", _divisors(world // (t * p))):
                d = world // (t * p * c)
                if (c > 1 and s % (2 * c)) or space.fix("dp") not in (None, d) or B % d:
                    continue
                for e in _allowed(space, "ep", [e for e in _divisors(E) if (t * d * c) % e == 0] if E else [1]):
                    for b in _allowed(space, "micro_batch", _divisors(B // d)):
                        m = B // (b * d)
                        vps = [1] if p == 1 else [v for v in range(1, Lr // p + 1) if v == 1 or m % p == 0]
                        for v in _allowed(space, "vp", vps):
                            uneven = Lr % (p * v) != 0
                            if (uneven and space.even_pipeline_only) or (moe_overlap == "1f1b" and p > 1 and v == 1) \
                                    or (moe_overlap == "dualpipe" and p % 2):
                                continue
                            for te in _expert_tps(space, t, d, c, e):
                                rows.append((world, t, p, v, c, e, d, b, int(uneven), te))
    return rows


@st.composite
def spaces(draw):
    spec = model_spec(draw(st.sampled_from(model_spec_names())))
    W = draw(st.one_of(st.integers(1, 130), st.sampled_from((256, 512, 1024))))
    fixable = {"tp": (1, 2, 4, 8, 16), "pp": (1, 2, 4, 8), "vp": (1, 2, 3), "cp": (1, 2, 4), "ep": (1, 2, 8, 64),
               "dp": (1, 2, 8, 16), "micro_batch": (1, 2, 4), "etp": (1, 2, 4)}
    keys = draw(st.lists(st.sampled_from(sorted(fixable)), unique=True, max_size=3))
    fixed = tuple((k, draw(st.sampled_from(fixable[k]))) for k in keys)
    space = SearchSpace(spec=spec, seq=draw(st.sampled_from((1024, 4096, 6144))),
                        global_batch=draw(st.sampled_from((1, 16, 48, 96, 256, 1536))), gpus=(W,),
                        gpus_per_node=draw(st.sampled_from((1, 4, 6, 8, 72))), fixed=fixed,
                        even_pipeline_only=draw(st.booleans()))
    return space, W, draw(st.sampled_from(("none", "1f1b", "dualpipe")))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spaces())
def test_array_enumeration_equals_the_loops(case):
    space, W, moe_overlap = case
    cols = _base_rows(space, W, moe_overlap)
    got = list(zip(*(cols[k].tolist() for k in NAMES)))
    assert got == loop_rows(space, W, moe_overlap)
    # m = B / (b d) of every row
    assert (cols["m"] * cols["b"] * cols["d"] == space.global_batch).all()


def test_enumeration_by_hand_and_bounded():
    """llama2-7b (32 layers, 32 heads, n_kv 32) on W = 2 GPUs of one node, B = 2, fixed micro-batch 1:
    t in {1, 2}; (t=1): p in {1, 2}, then c in the divisors of 2/p with s = 4096 divisible by 2c, d = 2/(p c);
    (t=2): p = c = d = 1. Rows, in loop order: t=1 p=1 c=1 d=2; t=1 p=1 c=2 d=1; t=1 p=2 c=1 d=1 (m = 2
    divisible by p: v = 1..16, uneven where 32 mod 2v != 0: v = 3,5,6,7,9..15); t=2 p=1: 1 + 1 + 16 + 1 = 19."""
    space = SearchSpace(spec=model_spec("llama2-7b"), seq=4096, global_batch=2, gpus=(2,), gpus_per_node=8,
                        fixed=(("micro_batch", 1),))
    cols = _base_rows(space, 2)
    assert len(cols["t"]) == 19
    assert cols["t"].tolist() == [1] * 18 + [2]
    assert cols["c"].tolist()[:2] == [1, 2]
    assert cols["v"].tolist()[2:18] == list(range(1, 17))
    assert [v for v, u in zip(cols["v"].tolist()[2:18], cols["uneven"].tolist()[2:18]) if u] == \
        [3, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15]
    base, g = enumerate_space(space, 2)
    assert len(g) <= count_upper_bound(space)
