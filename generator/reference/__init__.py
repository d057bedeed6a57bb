"""The double-precision reference: what every generated kernel is compared with.

    solvers.py    Kinematics, Dynamics (position, velocity, acceleration; inverse and
                  forward dynamics, energy), Trajectory, their errors and warning
    numeric.py    Compiled: straight-line Python over floats for one point at a time
    linearize.py  mbforge.linearize: A, B, C, D about an operating point

The `mbforge simulate` command that runs these is a stage of its own (mbforge.simulate).

The stage below the model: it reads a model's Equations (mbforge.model), which imports
nothing from here. The solvers are exported here: `from mbforge.reference import Dynamics`.
"""
from .solvers import (AssemblyError, Dynamics, DynamicsError, Kinematics, RedundantConstraintsWarning,
                      SingularJacobianError, Trajectory)

__all__ = ["AssemblyError", "Dynamics", "DynamicsError", "Kinematics", "RedundantConstraintsWarning",
           "SingularJacobianError", "Trajectory"]
