"""`engram certs`: a deployment's own certificate authority and its NATS and Qdrant servers' certificates."""
from pathlib import Path
from typing import Annotated

import typer

from services.cli.base import console
from shared.tls.certificates import NATS_NAMES, QDRANT_NAMES, make


def certs(out: Annotated[Path, typer.Option("--out", help="the folder to write them to")] = Path("secrets") / "tls",
          nats_name: Annotated[list[str] | None, typer.Option(
              "--nats-name", help="a name or address the NATS servers are reached by (repeat; default: "
                                  + ", ".join(NATS_NAMES) + ")")] = None,
          qdrant_name: Annotated[list[str] | None, typer.Option(
              "--qdrant-name", help="a name or address of the Qdrant server (repeat; default: "
                                    + ", ".join(QDRANT_NAMES) + ")")] = None,
          days: Annotated[int, typer.Option("--days", min=1, help="how long the certificates last")] = 365) -> None:
    """Make a certificate authority and the NATS and Qdrant servers' certificates (keys readable by their owner
    only); clients trust ca.pem. Never commit them."""
    made = make(out, nats_names=tuple(nats_name or NATS_NAMES), qdrant_names=tuple(qdrant_name or QDRANT_NAMES),
                days=days)
    console.print(f"wrote {made.ca} and the certificates of {', '.join(made.servers)} into {out}: clients set "
                  f"ENGRAM_NATS_TLS_CA_FILE={made.ca} (and ENGRAM_QDRANT_TLS_CA_FILE) and use tls:// and https://")
