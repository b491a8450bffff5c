"""The same ClientApp and ServerApp in Flower's simulation engine (ray, `pip install "mslite-py[simulation]"`).

For many more clients than processes fit on one machine (50, 500): virtual SuperNodes share a few ray workers,
each worker runs one ClientApp call at a time in-process, so nothing is paid per message but the training
itself, against a process start-up (Flower + `lite` + a session) per message in a real federation
(`lite.federated.launch`). What runs is unchanged — `client.train` / `client.evaluate` behind the same
privacy mods, `server.main` with the same strategies, exports and `history.json` — only Flower's transport
is replaced by its in-memory grid; the mods below give each virtual node the node config a real SuperNode
would have from `--node-config` (Flower numbers simulated nodes by `partition-id`), and every call the run
config `flwr run --run-config` would carry.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Sequence

from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.clientapp.typing import ClientAppCallable
from flwr.serverapp import Grid, ServerApp
from flwr.simulation import run_simulation

from lite.federated import client, server
from lite.federated.privacy import privacy_mods
from lite.federated.launch import FederationError
from lite.status import NotSupportedError, ParamInvalidError


def simulated_apps(nodes: Sequence[dict[str, object]], run_config: dict[str, object]) -> tuple[ClientApp, ServerApp]:
    """A ClientApp whose virtual node `k` sees `nodes[k]` as its node config, and a ServerApp, both seeing
    `run_config` (keys as in `lite/federated/mslite-fl/pyproject.toml`; `model` and `out-dir` required)."""
    configs = [dict(n) for n in nodes]
    settings = dict(run_config)

    def as_node(msg: Message, context: Context, call_next: ClientAppCallable) -> Message:
        return call_next(msg, _with(context, configs[int(context.node_config["partition-id"])], settings))

    client_app = ClientApp(mods=[as_node, *privacy_mods()])
    client_app.train()(client.train)
    client_app.evaluate()(client.evaluate)
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        server.main(grid, _with(context, dict(context.node_config), settings))

    return client_app, server_app


def _with(context: Context, node_config: dict, run_config: dict) -> Context:
    """`context` (the same state) seen with other node and run configs; Flower refuses a changed run config in
    the context it keeps, so the apps get a copy."""
    return Context(run_id=context.run_id, node_id=context.node_id, node_config=node_config, state=context.state,
                   run_config=run_config)


def simulate(nodes: Sequence[dict[str, object]], run_config: dict[str, object], cpus: int = 2,
             cpus_per_client: float = 1.0) -> dict:
    """Run the federation of `nodes` (one node config each: `model`, `shard`, ...) in Flower's simulation
    engine on `cpus` ray CPUs (`cpus / cpus_per_client` ClientApp calls at a time); returns the ServerApp's
    final history (`<out-dir>/history.json`)."""
    if not nodes:
        raise ParamInvalidError("a simulation needs at least one node")
    if importlib.util.find_spec("ray") is None:
        raise NotSupportedError("Flower's simulation engine needs ray: pip install 'mslite-py[simulation]'")
    history = Path(str(run_config["out-dir"])) / "history.json"
    history.unlink(missing_ok=True)
    client_app, server_app = simulated_apps(nodes, {"min-nodes": len(nodes), **run_config})
    run_simulation(server_app=server_app, client_app=client_app, num_supernodes=len(nodes),
                   backend_config={"client_resources": {"num_cpus": cpus_per_client, "num_gpus": 0.0},
                                   "init_args": {"num_cpus": cpus, "num_gpus": 0, "include_dashboard": False}})
    data = json.loads(history.read_text()) if history.exists() else {}
    if not data.get("finished"):
        raise FederationError(f"the simulation did not finish; see {history.parent}")
    return data
