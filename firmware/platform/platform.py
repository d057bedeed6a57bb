"""mbforge's local PlatformIO dev-platform for boards that QEMU emulates.

Nothing here is fetched from a registry: the toolchain comes in through the project's
`platform_packages = toolchain-gccarmnoneeabi@symlink://...` and the build engine is the
offline tool-scons laid out by mbforge.firmware.offline.
"""
from platformio.public import PlatformBase


class MbforgeemulatedPlatform(PlatformBase):
    pass
