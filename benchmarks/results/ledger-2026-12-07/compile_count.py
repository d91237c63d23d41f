import sys, jax
from vramtune.compat import patch_brax
patch_brax()
from brax.training.agents.ppo import train as ppo
from vramtune.workload.profile import load_profile
from vramtune.workload.build import build_environment, network_factory
from vramtune.measure.ledger import LedgerWatch
events = []
jax.monitoring.register_event_duration_secs_listener(
    lambda ev, d, **kw: events.append(d) if ev == "/jax/core/compile/backend_compile_duration" else None)
prof = load_profile("quick"); n = 64
env, extra = build_environment(prof, n)
kw = dict(prof.ppo); kw.update(extra); kw.update(batch_size=64, num_minibatches=4)
w = None
if sys.argv[1] == "on":
    w = LedgerWatch(num_envs=n, batch_size=64, num_minibatches=4, unroll_length=10, action_size=env.action_size, on_gpu=False, devices=1, bootstrap_on_timeout=False)
    w.install(jax)
ppo.train(env, num_timesteps=64*4*10*20*3, num_evals=4, num_envs=n, episode_length=prof.episode_length,
          network_factory=network_factory(prof), **kw)
print(jax.__version__, sys.argv[1], "backend compiles:", len(events), "compile s: %.1f" % sum(events), w.fields() if w else "", w.error if w else "")
