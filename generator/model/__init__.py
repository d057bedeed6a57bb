"""Describing mechanisms and building their equations (atomized).

    model.py      Model: coordinates, equations, bodies, joints, forces, actuators, outputs
    bodies.py     Body interface; reference-point bodies (2-D; 3-D with Euler parameters)
    natural.py    natural coordinates: basic points, unit vectors, their bodies and joints
    relative.py   relative coordinates: trees of bases and points, the kinematic operators
    joints.py     joints between bodies of any family; a joint kind closed between two (of_kind)
    joint_kinds.py  joint kinds of trees (revolute, prismatic, spherical): what relative
                  coordinates, explicit trees, the recursive kernels and closed joints
                  (Model.joint) move a frame by
    tree.py       JointTree: a model built joint by joint (explicit joint tree)
    forces.py     applied forces, spring-dampers, actuators (virtual power)
    equations.py  Equations: what kernels and solvers consume
    reduce.py     reduced_equations: the Equations over the independent coordinates of
                  Model.explicit's closed forms (--reduced), and expand() back to every one
    urdf.py       from_urdf: a URDF robot as a Model (relative coordinates, explicit joint tree)
    errors.py     ModelError (imported by model, joints and relative alike: no cycle)

Each Model owns a symbol scope (ir.Scope): names are unique per model. The numeric
reference solvers (Kinematics, Dynamics) are the next stage, mbforge.reference: they read
Equations, and nothing here imports them.
"""
from .bodies import Body, Body2D, Body3D, Ground
from .equations import Equations
from .model import Model, ModelError
from .urdf import URDFError, from_urdf

__all__ = ["Equations", "Model", "ModelError", "URDFError", "Body", "Body2D", "Body3D", "Ground", "from_urdf"]
