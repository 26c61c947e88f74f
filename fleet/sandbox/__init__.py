"""The local sandbox: a real Kubernetes control plane on loopback with simulated NVIDIA GPU nodes.

Used by every cluster test, every benchmark and the demo. Modules:

- ``versions``    the pinned versions (Kubernetes, KWOK, Helm)
- ``releases``    the selectable Kubernetes releases and each one's DRA gates and APIs
- ``binaries``    build once per version from Go modules (Gitea too), cache outside the tree
- ``profiles``    which GPU node pools to simulate (YAML, checked before start)
- ``gpus``        Nodes, ResourceSlices and DeviceClasses as the NVIDIA driver publishes them
- ``healthevents`` a GPU's XID error or loss played as the driver's device taints
- ``credentials`` service-account key, static tokens (admin, alice, bob), kubeconfig
- ``processes``   start/probe/stop component process groups
- ``forges``      the git forge (a real Gitea on loopback) and the calls made to its API
- ``identities``  Gitea as the OpenID provider: its users, their organizations (groups), the console's client
- ``clusters``    up / down / status; stop and start etcd, kube-apiserver or Gitea of a running sandbox
"""

from fleet.sandbox.clusters import Sandbox, default_dir, down, status, up
from fleet.sandbox.errors import BuildError, ProfileError, SandboxError, StartError

__all__ = ["BuildError", "ProfileError", "Sandbox", "SandboxError", "StartError", "default_dir", "down", "status", "up"]
