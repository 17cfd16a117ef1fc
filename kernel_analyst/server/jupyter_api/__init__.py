"""The Jupyter kernel API of the service: its conversations as Jupyter kernels.

``kernel-analyst serve`` answers the REST and websocket API of a Jupyter Kernel Gateway
(``/api/kernelspecs``, ``/api/kernels``, ``/api/sessions``,
``/api/kernels/{id}/channels``), so a stock JupyterLab started with ``--gateway-url``
and VS Code's "existing Jupyter server" attach to a conversation's live kernel, the
tenant's own only (the service's token is the gateway's auth token). A person's cells
take the conversation's turn like the agent's and land in the same audit notebook,
marked as theirs.

- ``models.py``: a conversation as kernelspec, kernel and session (ids, JSON models);
- ``routes.py``: the REST half;
- ``channels.py``: the channels websocket (messages relayed through
  ``KernelSession.relay``; IOPub broadcast through ``KernelSession.watch``);
- ``auth.py``: the tokens Jupyter clients send (``token`` scheme; ``?token=`` on a
  channels URL, taken out before it could be logged).

May import the server's service, records, config and exceptions, and the kernels' public
names; nothing in the server imports it but the app.
"""

from .auth import QueryToken
from .channels import channels_router
from .routes import jupyter_router

__all__ = ["QueryToken", "channels_router", "jupyter_router"]
