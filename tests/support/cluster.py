"""A NATS JetStream cluster of nats-servers from the wheel, on loopback."""
import asyncio
from pathlib import Path

import nats

from shared.messaging import nats_server
from shared.messaging.nats_server import EmbeddedNats, free_port
from tests.support.polling import eventually


async def start_cluster(folder: Path, size: int = 3, name: str = "engram") -> list[EmbeddedNats]:
    """`size` nats-servers from the wheel as one JetStream cluster on loopback (node i is `n<i>`, storing in
    folder/n<i>), once its JetStream answers (a meta leader is elected)."""
    route_ports = [free_port() for _ in range(size)]
    routes = ", ".join(f'"nats-route://127.0.0.1:{port}"' for port in route_ports)
    configs: list[Path] = []
    for i, route_port in enumerate(route_ports):
        (folder / f"n{i}").mkdir(parents=True)
        configs.append(folder / f"n{i}" / "nats.conf")
        # JetStream in a cluster needs each server named; the store folder comes from nats_server.start.
        configs[-1].write_text(f"server_name: n{i}\ncluster {{\n  name: {name}\n  listen: 127.0.0.1:{route_port}\n"
                               f"  routes: [{routes}]\n}}\n")
    servers = list(await asyncio.gather(*(asyncio.to_thread(nats_server.start, config.parent / "jetstream",
                                                            config=config) for config in configs)))
    nc = await nats.connect(servers[0].url)

    async def answers() -> bool:  # no meta leader yet: JetStream's API does not answer (or answers 503)
        try:
            await nc.jetstream().account_info()
        except Exception:
            return False
        return True

    try:
        await eventually(answers, timeout_s=30)
    except AssertionError:
        raise AssertionError(f"the {size}-node cluster's JetStream never answered; logs in {folder}") from None
    finally:
        await nc.close()
    return servers
