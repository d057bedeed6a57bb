"""Describing mechanisms and building their equations (atomized)."""
from .equations import Equations
from .model import Model, ModelError
from .solve import AssemblyError, Kinematics

__all__ = ["Equations", "Model", "ModelError", "AssemblyError", "Kinematics"]
