"""The simulated UR5e as MoveIt sees it: a URDF and an SRDF written from the world model.

A move_group holds its robot as two parameters, ``robot_description`` (URDF) and
``robot_description_semantic`` (SRDF). The simulated move_group
(:mod:`erobs_bt.doubles.sim_move_group`) serves these two texts, built here from the facts the
embedded planner already uses, so that a MoveIt client sees the same robot:

* **Kinematic chain** (URDF): the UR5e's six revolute joints with the joint origins of
  ``ur_description`` for the DH parameters of :mod:`erobs_bt.world.kinematics`
  (``base_link`` → ``base_link_inertia`` (Rz π) → ``shoulder_link`` (z d1) →
  ``upper_arm_link`` (Rx π/2) → ``forearm_link`` (x a2) → ``wrist_1_link`` (x a3, z d4) →
  ``wrist_2_link`` (y −d5, Rx π/2) → ``wrist_3_link`` (y d6, rpy (π/2, π, π)) → ``flange``
  (rpy (0, −π/2, −π/2)) → ``tool0`` (rpy (π/2, 0, π/2)); ``base`` (Rz π) on ``base_link``).
  :func:`urdf_text`'s ``flange`` pose equals :func:`~erobs_bt.world.kinematics.fk` (a test
  checks it with pinocchio). Limits: position :data:`~erobs_bt.world.kinematics.JOINT_LIMITS`,
  velocity :data:`~erobs_bt.world.kinematics.VELOCITY_LIMITS` [rad, rad/s]; effort from UR's
  ``ur5e/joint_limits.yaml`` (150 N·m shoulder and elbow, 28 N·m wrists).
* **Tool tip frames**: every gripper's ``tip_frame`` of the cell as a fixed link on
  ``flange`` at the gripper's ``tip`` pose, so a client may name any tool's tip as the IK
  or end-effector link. Tool geometry is not in the URDF: on a cell with a tool changer the
  tool is attached through the planning scene (``AttachedCollisionObject``), not baked into
  the description.
* **Geometry**: none in the URDF. The move_group checks collisions with the world model
  (:mod:`erobs_bt.world.collision`: UR's collision meshes, the tool primitives, obstacles).
* **SRDF**: the planning group :data:`GROUP` (EROBS's ``ur_arm``: the chain ``base_link`` →
  ``flange``), one ``group_state`` per named state of the cell (``moveit_home``, joint
  values in radians), the fixed virtual joint ``world`` → ``base_link``.

Both texts are deterministic (the same cell gives the same bytes), so a digest of them is a
stable model revision.
"""

from __future__ import annotations

import math
from xml.sax.saxutils import quoteattr

from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.world.cell import ROBOT_LINKS, CellConfig
from erobs_bt.world.kinematics import (
    DH_A,
    DH_D,
    JOINT_LIMITS,
    VELOCITY_LIMITS,
)

#: The planning group of the arm (EROBS's MoveIt configurations call it ``ur_arm``).
GROUP = "ur_arm"
#: The root and tip links of :data:`GROUP`.
BASE_LINK = "base_link"
TIP_LINK = "flange"
#: The robot's name in both descriptions.
ROBOT_NAME = "ur5e"
#: Effort limits [N·m], UR's ``ur5e/joint_limits.yaml``.
EFFORT_LIMITS = (150.0, 150.0, 150.0, 28.0, 28.0, 28.0)

_PI = math.pi
#: The six arm joints: (name, parent, child, xyz [m], rpy [rad]), ur_description's origins.
_ARM_JOINTS: tuple[tuple[str, str, str, tuple[float, float, float], tuple[float, float, float]], ...] = (
    (JOINT_NAMES[0], "base_link_inertia", "shoulder_link", (0.0, 0.0, float(DH_D[0])), (0.0, 0.0, 0.0)),
    (JOINT_NAMES[1], "shoulder_link", "upper_arm_link", (0.0, 0.0, 0.0), (_PI / 2, 0.0, 0.0)),
    (JOINT_NAMES[2], "upper_arm_link", "forearm_link", (float(DH_A[1]), 0.0, 0.0), (0.0, 0.0, 0.0)),
    (
        JOINT_NAMES[3],
        "forearm_link",
        "wrist_1_link",
        (float(DH_A[2]), 0.0, float(DH_D[3])),
        (0.0, 0.0, 0.0),
    ),
    (JOINT_NAMES[4], "wrist_1_link", "wrist_2_link", (0.0, -float(DH_D[4]), 0.0), (_PI / 2, 0.0, 0.0)),
    (JOINT_NAMES[5], "wrist_2_link", "wrist_3_link", (0.0, float(DH_D[5]), 0.0), (_PI / 2, _PI, _PI)),
)
#: Fixed joints: (parent, child, xyz [m], rpy [rad]).
_FIXED: tuple[tuple[str, str, tuple[float, float, float], tuple[float, float, float]], ...] = (
    ("base_link", "base_link_inertia", (0.0, 0.0, 0.0), (0.0, 0.0, _PI)),
    ("base_link", "base", (0.0, 0.0, 0.0), (0.0, 0.0, _PI)),
    ("wrist_3_link", "flange", (0.0, 0.0, 0.0), (0.0, -_PI / 2, -_PI / 2)),
    ("flange", "tool0", (0.0, 0.0, 0.0), (_PI / 2, 0.0, _PI / 2)),
)
#: Every link of the arm: the collision model's links, then the frames without geometry.
ARM_LINKS: tuple[str, ...] = ("base_link", "base", *ROBOT_LINKS, "flange", "tool0")


def _num(value: float) -> str:
    text = repr(round(float(value), 12))
    return "0" if text in ("0.0", "-0.0") else text


def _origin(xyz: tuple[float, ...], rpy: tuple[float, ...]) -> str:
    return f'<origin xyz="{" ".join(map(_num, xyz))}" rpy="{" ".join(map(_num, rpy))}"/>'


def tip_frames(cell: CellConfig) -> dict[str, tuple[tuple[float, ...], tuple[float, ...]]]:
    """The tool tip frames of ``cell``: ``tip_frame`` → (xyz [m], rpy [rad]) in ``flange``.

    A tip frame named like an arm link, or named by two grippers at different poses, is left
    out (a URDF link has one parent and one pose).
    """
    frames: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {}
    clashes: set[str] = set()
    for name in sorted(cell.grippers):
        gripper = cell.grippers[name]
        frame = gripper.tip_frame
        if not frame or frame in ARM_LINKS:
            continue
        pose = (tuple(float(v) for v in gripper.tip.xyz), tuple(float(v) for v in gripper.tip.rpy))
        if frame in frames and frames[frame] != pose:
            clashes.add(frame)
        frames.setdefault(frame, pose)
    return {frame: pose for frame, pose in frames.items() if frame not in clashes}


def urdf_text(cell: CellConfig) -> str:
    """The URDF of the simulated UR5e with the cell's tool tip frames (module docstring).

    Returns:
        The URDF document (UTF-8 text, deterministic for a cell).
    """
    tips = tip_frames(cell)
    lines = ['<?xml version="1.0"?>', f"<robot name={quoteattr(ROBOT_NAME)}>"]
    for link in (*ARM_LINKS, *sorted(tips)):
        lines.append(f"  <link name={quoteattr(link)}/>")
    for parent, child, xyz, rpy in _FIXED:
        lines += [
            f'  <joint name="{parent}-{child}_fixed_joint" type="fixed">',
            f'    <parent link="{parent}"/>',
            f'    <child link="{child}"/>',
            f"    {_origin(xyz, rpy)}",
            "  </joint>",
        ]
    for i, (name, parent, child, xyz, rpy) in enumerate(_ARM_JOINTS):
        lower, upper = (float(v) for v in JOINT_LIMITS[i])
        lines += [
            f'  <joint name="{name}" type="revolute">',
            f'    <parent link="{parent}"/>',
            f'    <child link="{child}"/>',
            f"    {_origin(xyz, rpy)}",
            '    <axis xyz="0 0 1"/>',
            f'    <limit lower="{_num(lower)}" upper="{_num(upper)}" '
            f'effort="{_num(EFFORT_LIMITS[i])}" velocity="{_num(float(VELOCITY_LIMITS[i]))}"/>',
            "  </joint>",
        ]
    for frame, (tip_xyz, tip_rpy) in sorted(tips.items()):
        lines += [
            f'  <joint name={quoteattr(f"flange-{frame}_fixed_joint")} type="fixed">',
            '    <parent link="flange"/>',
            f"    <child link={quoteattr(frame)}/>",
            f"    {_origin(tip_xyz, tip_rpy)}",
            "  </joint>",
        ]
    lines.append("</robot>")
    return "\n".join(lines) + "\n"


def srdf_text(cell: CellConfig) -> str:
    """The SRDF: group :data:`GROUP` (chain ``base_link`` → ``flange``), the cell's named
    states as group states [rad], the fixed virtual joint ``world`` → ``base_link``.

    Returns:
        The SRDF document (deterministic for a cell).
    """
    lines = ['<?xml version="1.0"?>', f"<robot name={quoteattr(ROBOT_NAME)}>"]
    lines += [
        f"  <group name={quoteattr(GROUP)}>",
        f'    <chain base_link="{BASE_LINK}" tip_link="{TIP_LINK}"/>',
        "  </group>",
    ]
    for state in sorted(cell.named_states):
        lines.append(f"  <group_state name={quoteattr(state)} group={quoteattr(GROUP)}>")
        for joint, value in zip(JOINT_NAMES, cell.named_states[state], strict=True):
            lines.append(f'    <joint name="{joint}" value="{_num(value)}"/>')
        lines.append("  </group_state>")
    lines.append(
        '  <virtual_joint name="virtual_joint" type="fixed" parent_frame="world" child_link="base_link"/>'
    )
    lines.append("</robot>")
    return "\n".join(lines) + "\n"
