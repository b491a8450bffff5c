"""The client's privacy mods, each switched per run: Flower's `LocalDpMod` and `secaggplus_mod`.

`secagg` (run config `secagg = true`): the SecAgg+ protocol (Bell et al. 2020) — the client masks its quantized
update with pairwise and private masks, so the server learns only the sum (`lite.federated.secagg` runs the
server side). It sits outside `local_dp`, so the noise is added before masking.

`local_dp` wraps every train reply: the update (sent weights minus received global weights) is clipped to L2
norm `dp-clip` and Gaussian noise of std `dp-sensitivity * sqrt(2 ln(1.25 / dp-delta)) / dp-epsilon` is added
to every weight — on the device, before anything leaves it. It is off while the run config's `dp-clip` is 0
(the default); `dp-sensitivity` defaults to `2 * dp-clip`, the L2 distance any two clipped updates can have.
The guarantee is (epsilon, delta) per round for each client's update (rounds compose).
"""
from __future__ import annotations

from flwr.app import Context, Message, MessageType
from flwr.client.mod import secaggplus_mod
from flwr.clientapp.mod import LocalDpMod
from flwr.clientapp.typing import ClientAppCallable, Mod

from lite.status import ParamInvalidError


def local_dp_settings(run_config: dict) -> tuple[float, float, float, float] | None:
    """(clip, sensitivity, epsilon, delta) from a run config, or None when DP is off."""
    clip = float(run_config.get("dp-clip", 0.0))
    if clip <= 0:
        return None
    epsilon, delta = float(run_config.get("dp-epsilon", 1.0)), float(run_config.get("dp-delta", 1e-5))
    sensitivity = float(run_config.get("dp-sensitivity", 0.0)) or 2 * clip
    if epsilon <= 0 or not 0 < delta < 1:
        raise ParamInvalidError(f"local DP needs dp-epsilon > 0 and 0 < dp-delta < 1, got {epsilon} and {delta}")
    return clip, sensitivity, epsilon, delta


def local_dp(msg: Message, context: Context, call_next: ClientAppCallable) -> Message:
    """Flower's `LocalDpMod` on train messages when the run config turns it on; a pass-through otherwise."""
    settings = local_dp_settings(dict(context.run_config))
    if settings is None or msg.metadata.message_type != MessageType.TRAIN:
        return call_next(msg, context)
    return LocalDpMod(*settings)(msg, context, call_next)


def secagg(msg: Message, context: Context, call_next: ClientAppCallable) -> Message:
    """Flower's `secaggplus_mod` when the run config's `secagg` is true; a pass-through otherwise."""
    if not context.run_config.get("secagg", False):
        return call_next(msg, context)
    return secaggplus_mod(msg, context, call_next)


def privacy_mods() -> list[Mod]:
    """The client app's mods, outermost first."""
    return [secagg, local_dp]
