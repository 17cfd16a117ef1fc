"""Sessions whose kernels run on a Jupyter Kernel Gateway or Enterprise Gateway.

Needs: a gateway you can reach, e.g. on this machine
    KG_AUTH_TOKEN=secret jupyter kernelgateway --KernelGatewayApp.ip=127.0.0.1 \\
        --KernelGatewayApp.port=8888 --ZMQChannelsWebsocketConnection.limit_rate=False
Run:   KERNEL_ANALYST_GATEWAY_URL=http://127.0.0.1:8888 KERNEL_ANALYST_GATEWAY_TOKEN=secret \\
           .venv/bin/python examples/remote_gateway.py [DATA.csv]
Writes out/remote-gateway.ipynb. See docs/gateway.md for Enterprise Gateway on Kubernetes.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from kernel_analyst import SessionManager
from kernel_analyst.kernels.launch import GatewayBackend

DATA = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "data" / "penguins.csv")


async def main() -> None:
    backend = GatewayBackend.from_env()  # URL and token from the environment
    if backend is None:
        sys.exit("set KERNEL_ANALYST_GATEWAY_URL (and KERNEL_ANALYST_GATEWAY_TOKEN); see the docstring")
    print("gateway:", await backend.check())
    with tempfile.TemporaryDirectory() as runs:
        async with SessionManager(runs, backend=backend) as manager:
            session = await manager.session("remote-example")
            # The remote kernel's filesystem is not this machine's: the upload goes through
            # the kernel, in sha256-checked chunks.
            info = await session.upload(DATA)
            print(f"uploaded {info.name} ({info.size:,} bytes, sha256 {info.sha256[:12]}...)")
            ex = await session.execute(f"import pandas as pd\ndf = pd.read_csv({info.name!r})\ndf.shape")
            print("shape:", ex.text.strip(), "| created:", ex.variables.describe())
            ex = await session.execute("df.select_dtypes('number').hist(figsize=(8, 5));")
            print("plot:", ex.status, f"{len(ex.images)} image(s)")
            await session.execute("df.describe().to_csv('summary.csv')")
            print((await session.download("summary.csv")).decode()[:200])
            print("files on the kernel:", [f.name for f in await session.files()])
            path = await session.export(Path("out") / "remote-gateway.ipynb")
            print("audit notebook:", path)


if __name__ == "__main__":
    asyncio.run(main())
