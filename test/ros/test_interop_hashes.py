"""Wire compatibility of the interface packages we build in place of upstream ones.

Every type and every generated sub-type (``_Goal``, ``_Result``, ``_Feedback``,
``_FeedbackMessage``, ``_SendGoal*``, ``_GetResult*``, ``_Request``, ``_Response``, ``_Event``)
listed in ``../shared/interop/type-hashes.json`` must have exactly the upstream RIHS01 hash in
the types this venv imports. The hash is read from the loaded C type support (what rclpy hands
to rcl and rmw announces on the wire), so the check covers the built artefact itself, whether it
came from interfaces/ (scripts/setup.sh) or from a sourced ROS distribution: nothing is skipped
for a package that is provided elsewhere. A second test asks rmw itself, through the ROS graph.

The constants (not part of a RIHS01 hash) are checked against the upstream values too.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
from interop import (
    built_type_hash,
    load_type_hashes,
    python_type,
    require_type_hashes,
    service_part_hashes,
    shared_required,
    type_origin,
)
from ros_fixtures import ros_environment

#: The upstream interface packages erobs_bt builds under interfaces/ when nothing provides them.
BUILT_HERE = (
    "beambot_interfaces",
    "control_msgs",
    "epick_msgs",
    "moveit_msgs",
    "object_recognition_msgs",
    "octomap_msgs",
    "py_trees_ros_interfaces",
    "ur_msgs",
)

try:
    _ALL = {
        name: value
        for name, value in load_type_hashes().all_hashes().items()
        if name.split("/")[0] in BUILT_HERE
    }
except FileNotFoundError:
    _ALL = {}


def _origin(name: str) -> str:
    try:
        return type_origin(name.split("/")[0])
    except ImportError as error:
        return f"not importable ({error}); run `make setup`"


@pytest.mark.parametrize("name", sorted(_ALL) or ["(type-hashes.json absent)"])
def test_built_type_has_the_upstream_hash(name: str) -> None:
    require_type_hashes()
    expected = _ALL[name]
    try:
        actual = built_type_hash(name)
    except (ImportError, LookupError) as error:
        pytest.fail(f"{name}: cannot read its type hash: {error} (package from {_origin(name)})")
    assert actual == expected, f"{name} from {_origin(name)}: {actual} != upstream {expected}"


def test_every_listed_package_is_one_we_build_or_import() -> None:
    upstream = require_type_hashes()
    assert set(upstream.packages()) <= set(BUILT_HERE), (
        "type-hashes.json lists a package that interfaces/ does not build; add it there"
    )
    for package in BUILT_HERE:
        importlib.import_module(package)  # an ImportError fails: nothing is skipped


def test_service_type_support_agrees_with_its_parts() -> None:
    """The Request/Response/Event members of each service's type support (what rcl uses for a
    client or server) carry the same hashes as the parts' own type supports."""
    upstream = require_type_hashes()
    services = [
        component.removesuffix("_Request")
        for entry in upstream.values()
        if entry.package in BUILT_HERE
        for component in entry.hashes()
        if component.endswith("_Request")
    ]
    assert services, "no service listed"
    for service in services:
        for part, value in service_part_hashes(service).items():
            assert value == upstream.all_hashes()[part], f"{part} via {service}"


def test_follow_joint_trajectory_is_the_layout_of_this_distro_not_the_other() -> None:
    """FollowJointTrajectory is the one control_msgs type whose layout differs between the
    distros: the Feedback of control_msgs ``master`` (6.3.0+, Kilted) has ``int32 index`` and
    ``int32 multi_dof_index``; that of ``jazzy`` (5.x) has neither. The built type is this venv's
    distro's layout, by hash and by field, and none of the other layouts."""
    upstream = require_type_hashes()
    fjt = upstream["control_msgs/action/FollowJointTrajectory"]
    others = {variant["hash"] for variant in fjt.variants}
    assert others and fjt.hash not in others
    assert built_type_hash(fjt.type) == fjt.hash and built_type_hash(fjt.type) not in others
    assert fjt.source == {"jazzy": "control_msgs@jazzy", "kilted": "control_msgs@master"}[upstream.distro]
    feedback = python_type("control_msgs/action/FollowJointTrajectory_Feedback")
    fields: dict[str, str] = feedback.get_fields_and_field_types()  # type: ignore[attr-defined]
    indices = {name: fields.get(name) for name in ("index", "multi_dof_index")}
    if upstream.distro == "jazzy":
        assert indices == {"index": None, "multi_dof_index": None}, fields
    else:
        assert indices == {"index": "int32", "multi_dof_index": "int32"}, fields


def test_absent_shared_skips_with_the_reason_or_fails_when_required(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import interop

    monkeypatch.setattr(interop, "TYPE_HASHES_FILE", tmp_path / "shared" / "interop" / "type-hashes.json")
    monkeypatch.delenv(interop.REQUIRE_SHARED_ENV, raising=False)
    assert not shared_required()
    with pytest.raises(pytest.skip.Exception, match=r"type-hashes.json not found \(../shared is absent\)"):
        interop.require_type_hashes()
    monkeypatch.setenv(interop.REQUIRE_SHARED_ENV, "1")
    assert shared_required()
    with pytest.raises(pytest.fail.Exception, match="EROBS_BT_REQUIRE_SHARED=1 requires them"):
        interop.require_type_hashes()


# ---- py_trees_ros_interfaces is built whole ------------------------------------------------

#: Every interface of py_trees_ros_interfaces 2.1 and the fields of each part, as the generated
#: Python types name them (the published field layout: names, types and order are facts).
#: py_trees_ros 2.2 imports its ``msg``, ``srv`` and ``action`` modules (``action.Dock`` for its
#: demo behaviours), so a subset breaks ``import py_trees_ros``. type-hashes.json lists the
#: snapshot-stream types only (their hashes are checked above); the types below are the ones it
#: does not list, so their fields are checked here instead.
PY_TREES_ROS_INTERFACES: dict[str, dict[str, str]] = {
    "msg/PublisherDetails": {"topic_name": "string", "message_type": "string", "latched": "boolean"},
    "msg/SubscriberDetails": {"topic_name": "string", "message_type": "string", "latched": "boolean"},
    "srv/CloseBlackboardStream_Request": {"topic_name": "string"},
    "srv/CloseBlackboardStream_Response": {"result": "boolean"},
    "srv/GetBlackboardVariables_Request": {},
    "srv/GetBlackboardVariables_Response": {"variables": "sequence<string>"},
    "srv/IntrospectPublishers_Request": {},
    "srv/IntrospectPublishers_Response": {
        "publisher_details": "sequence<py_trees_ros_interfaces/PublisherDetails>"
    },
    "srv/IntrospectSubscribers_Request": {},
    "srv/IntrospectSubscribers_Response": {
        "subscriber_details": "sequence<py_trees_ros_interfaces/SubscriberDetails>"
    },
    "srv/OpenBlackboardStream_Request": {
        "variables": "sequence<string>",
        "filter_on_visited_path": "boolean",
        "with_activity_stream": "boolean",
    },
    "srv/OpenBlackboardStream_Response": {"topic": "string"},
    "srv/StatusReport_Request": {},
    "srv/StatusReport_Response": {"report": "string"},
    "action/Dock_Goal": {"dock": "boolean"},
    "action/Dock_Result": {"message": "string"},
    "action/Dock_Feedback": {"percentage_completed": "float"},
    "action/MoveBase_Goal": {"target_pose": "geometry_msgs/PoseStamped"},
    "action/MoveBase_Result": {"message": "string"},
    "action/MoveBase_Feedback": {"base_position": "geometry_msgs/PoseStamped"},
    "action/Rotate_Goal": {},
    "action/Rotate_Result": {"message": "string"},
    "action/Rotate_Feedback": {"percentage_completed": "float", "angle_rotated": "float"},
}
#: The top-level types of the package (messages, services, actions).
PY_TREES_ROS_INTERFACES_TYPES = {
    "msg": (
        "ActivityItem",
        "Behaviour",
        "BehaviourTree",
        "KeyValue",
        "PublisherDetails",
        "ServiceDetails",
        "SnapshotStreamParameters",
        "Statistics",
        "SubscriberDetails",
    ),
    "srv": (
        "CloseBlackboardStream",
        "CloseSnapshotStream",
        "GetBlackboardVariables",
        "IntrospectPublishers",
        "IntrospectServices",
        "IntrospectSubscribers",
        "OpenBlackboardStream",
        "OpenSnapshotStream",
        "ReconfigureSnapshotStream",
        "StatusReport",
    ),
    "action": ("Dock", "MoveBase", "Rotate"),
}


def test_py_trees_ros_interfaces_is_the_whole_package() -> None:
    """Every message, service and action imports with its C type support and a RIHS01 hash,
    nothing more is there, and the parts' fields are upstream's."""
    for kind, names in PY_TREES_ROS_INTERFACES_TYPES.items():
        module = importlib.import_module(f"py_trees_ros_interfaces.{kind}")
        exported = {name for name in vars(module) if not name.startswith("_")}
        top_level = {name for name in exported if "_" not in name}  # not the generated parts
        assert top_level == set(names), f"py_trees_ros_interfaces.{kind}: {sorted(top_level)}"
        for name in names:
            assert built_type_hash(f"py_trees_ros_interfaces/{kind}/{name}").startswith("RIHS01_")
    for part, fields in PY_TREES_ROS_INTERFACES.items():
        cls = python_type(f"py_trees_ros_interfaces/{part}")
        actual: dict[str, str] = cls.get_fields_and_field_types()  # type: ignore[attr-defined]
        actual.pop("structure_needs_at_least_one_member", None)  # rosidl's filler of an empty part
        assert actual == fields, f"py_trees_ros_interfaces/{part}: {actual}"


# ---- constants (facts of the upstream definitions; a RIHS01 hash does not cover them) --------


def _constants(full_name: str) -> dict[str, Any]:
    """The constants of a generated type (rosidl_generator_py makes them properties of the
    type's metaclass)."""
    cls = python_type(full_name)
    return {
        name: getattr(cls, name)
        for name, attribute in vars(type(cls)).items()
        if isinstance(attribute, property) and name.isupper()
    }


def test_follow_joint_trajectory_error_codes() -> None:
    assert _constants("control_msgs/action/FollowJointTrajectory_Result") == {
        "SUCCESSFUL": 0,
        "INVALID_GOAL": -1,
        "INVALID_JOINTS": -2,
        "OLD_HEADER_TIMESTAMP": -3,
        "PATH_TOLERANCE_VIOLATED": -4,
        "GOAL_TOLERANCE_VIOLATED": -5,
    }


def test_joint_component_tolerance_components() -> None:
    assert _constants("control_msgs/msg/JointComponentTolerance") == {
        "X_AXIS": 1,
        "Y_AXIS": 2,
        "Z_AXIS": 3,
        "TRANSLATION": 4,
        "ROTATION": 5,
    }


def test_epick_object_detection_status_constants() -> None:
    assert _constants("epick_msgs/msg/ObjectDetectionStatus") == {
        "UNKNOWN": 0,
        "OBJECT_DETECTED_AT_MIN_PRESSURE": 1,
        "OBJECT_DETECTED_AT_MAX_PRESSURE": 2,
        "NO_OBJECT_DETECTED": 3,
    }


def test_set_io_constants() -> None:
    constants = _constants("ur_msgs/srv/SetIO_Request")
    assert {name: value for name, value in constants.items() if name.startswith(("FUN_", "STATE_"))} == {
        "FUN_SET_DIGITAL_OUT": 1,
        "FUN_SET_FLAG": 2,
        "FUN_SET_ANALOG_OUT": 3,
        "FUN_SET_TOOL_VOLTAGE": 4,
        "STATE_OFF": 0,
        "STATE_ON": 1,
        "STATE_TOOL_VOLTAGE_0V": 0,
        "STATE_TOOL_VOLTAGE_12V": 12,
        "STATE_TOOL_VOLTAGE_24V": 24,
    }
    pins = {name: value for name, value in constants.items() if name.startswith("PIN_")}
    assert pins == {
        "PIN_AOUT0": 0,
        "PIN_AOUT1": 1,
        **{f"PIN_DOUT{i}": i for i in range(8)},
        **{f"PIN_CONF_OUT{i}": 8 + i for i in range(8)},
        "PIN_TOOL_DOUT0": 16,
        "PIN_TOOL_DOUT1": 17,
    }


def test_behaviour_status_type_and_blackbox_constants() -> None:
    assert _constants("py_trees_ros_interfaces/msg/Behaviour") == {
        "INVALID": 1,
        "RUNNING": 2,
        "SUCCESS": 3,
        "FAILURE": 4,
        "UNKNOWN_TYPE": 0,
        "BEHAVIOUR": 1,
        "SEQUENCE": 2,
        "SELECTOR": 3,
        "PARALLEL": 4,
        "CHOOSER": 5,
        "DECORATOR": 6,
        "BLACKBOX_LEVEL_DETAIL": 1,
        "BLACKBOX_LEVEL_COMPONENT": 2,
        "BLACKBOX_LEVEL_BIG_PICTURE": 3,
        "BLACKBOX_LEVEL_NOT_A_BLACKBOX": 4,
        "BLACKBOARD_ACCESS_READ": "r",
        "BLACKBOARD_ACCESS_WRITE": "w",
        "BLACKBOARD_ACCESS_EXCLUSIVE_WRITE": "x",
    }


def test_activity_item_types() -> None:
    names = ("READ", "INITIALISED", "WRITE", "ACCESSED", "ACCESS_DENIED", "NO_KEY", "NO_OVERWRITE", "UNSET")
    assert _constants("py_trees_ros_interfaces/msg/ActivityItem") == {name: name for name in names}


def test_collision_object_operations() -> None:
    constants = _constants("moveit_msgs/msg/CollisionObject")
    assert {name: bytes(value) for name, value in constants.items()} == {
        "ADD": b"\x00",
        "REMOVE": b"\x01",
        "APPEND": b"\x02",
        "MOVE": b"\x03",
    }


def test_moveit_error_codes() -> None:
    assert _constants("moveit_msgs/msg/MoveItErrorCodes") == {
        "SUCCESS": 1,
        "UNDEFINED": 0,
        "FAILURE": 99999,
        "PLANNING_FAILED": -1,
        "INVALID_MOTION_PLAN": -2,
        "MOTION_PLAN_INVALIDATED_BY_ENVIRONMENT_CHANGE": -3,
        "CONTROL_FAILED": -4,
        "UNABLE_TO_AQUIRE_SENSOR_DATA": -5,  # upstream's spelling
        "TIMED_OUT": -6,
        "PREEMPTED": -7,
        "START_STATE_IN_COLLISION": -10,
        "START_STATE_VIOLATES_PATH_CONSTRAINTS": -11,
        "START_STATE_INVALID": -26,
        "GOAL_IN_COLLISION": -12,
        "GOAL_VIOLATES_PATH_CONSTRAINTS": -13,
        "GOAL_CONSTRAINTS_VIOLATED": -14,
        "GOAL_STATE_INVALID": -27,
        "UNRECOGNIZED_GOAL_TYPE": -28,
        "INVALID_GROUP_NAME": -15,
        "INVALID_GOAL_CONSTRAINTS": -16,
        "INVALID_ROBOT_STATE": -17,
        "INVALID_LINK_NAME": -18,
        "INVALID_OBJECT_NAME": -19,
        "FRAME_TRANSFORM_FAILURE": -21,
        "COLLISION_CHECKING_UNAVAILABLE": -22,
        "ROBOT_STATE_STALE": -23,
        "SENSOR_INFO_STALE": -24,
        "COMMUNICATION_FAILURE": -25,
        "CRASH": -29,
        "ABORT": -30,
        "NO_IK_SOLUTION": -31,
    }


def test_planning_scene_components_bits() -> None:
    names = (
        "SCENE_SETTINGS",
        "ROBOT_STATE",
        "ROBOT_STATE_ATTACHED_OBJECTS",
        "WORLD_OBJECT_NAMES",
        "WORLD_OBJECT_GEOMETRY",
        "OCTOMAP",
        "TRANSFORMS",
        "ALLOWED_COLLISION_MATRIX",
        "LINK_PADDING_AND_SCALING",
        "OBJECT_COLORS",
    )
    assert _constants("moveit_msgs/msg/PlanningSceneComponents") == {
        name: 1 << bit for bit, name in enumerate(names)
    }


def test_moveit_constraint_and_servo_constants() -> None:
    assert _constants("moveit_msgs/msg/OrientationConstraint") == {
        "XYZ_EULER_ANGLES": 0,
        "ROTATION_VECTOR": 1,
    }
    assert _constants("moveit_msgs/msg/VisibilityConstraint") == {
        "SENSOR_Z": 0,
        "SENSOR_Y": 1,
        "SENSOR_X": 2,
    }
    assert _constants("moveit_msgs/srv/ServoCommandType_Request") == {
        "JOINT_JOG": 0,
        "TWIST": 1,
        "POSE": 2,
    }


def test_interfaces_without_constants_have_none() -> None:
    """The beambot_interfaces actions and octomap_msgs define no constants upstream; a stray one
    here would be an API difference that no hash shows."""
    upstream = require_type_hashes()
    names = [
        component
        for entry in upstream.values()
        if entry.package in ("beambot_interfaces", "octomap_msgs")
        for component in entry.hashes()
    ]
    assert names
    assert {name: _constants(name) for name in names if _constants(name)} == {}


def test_behaviour_constants_match_py_trees() -> None:
    """py_trees_ros maps py_trees' enums onto these numbers; our tree conversion relies on it."""
    import py_trees

    constants = _constants("py_trees_ros_interfaces/msg/Behaviour")
    assert {status.name for status in py_trees.common.Status} <= set(constants)
    levels = {level.name for level in py_trees.common.BlackBoxLevel}
    assert {f"BLACKBOX_LEVEL_{name}" for name in levels} <= set(constants)


# ---- what rmw announces in the ROS graph -----------------------------------------------------


@pytest.mark.ros
def test_rmw_announces_the_upstream_hashes(tmp_path: Path) -> None:
    """A publisher of every listed message, a client of every listed service and an action
    client of every listed action, in one node of a private domain: the endpoints rmw puts in
    the graph carry the upstream hashes (msg topic: the msg hash; service client: its request
    writer the ``_Request`` hash, its reply reader the ``_Response`` hash; action client: its
    feedback reader the ``_FeedbackMessage`` hash, its send_goal request writer the
    ``_SendGoal_Request`` hash)."""
    upstream = require_type_hashes()
    import rclpy
    from rclpy.action import ActionClient

    from erobs_bt.backends.ros2_control.context import init_context

    with ros_environment(tmp_path / "ros-log") as environment:
        context = init_context(environment.domain_id)
        try:
            node = rclpy.create_node("interop_hashes", context=context)
            # (publishers or subscriptions, DDS-level topic name) -> expected hash
            expected: dict[tuple[str, str], str] = {}
            keep: list[Any] = []
            for entry in upstream.values():
                package, kind, name = entry.type.split("/")
                if package not in BUILT_HERE:
                    continue
                cls = python_type(entry.type)
                topic = f"interop/{package}/{name}"
                if kind == "msg":
                    keep.append(node.create_publisher(cls, topic, 1))
                    expected["publishers", f"rt/{topic}"] = entry.hash
                elif kind == "srv":
                    keep.append(node.create_client(cls, topic))
                    expected["publishers", f"rq/{topic}Request"] = entry.components[f"{entry.type}_Request"]
                    expected["subscriptions", f"rr/{topic}Reply"] = entry.components[f"{entry.type}_Response"]
                else:
                    keep.append(ActionClient(node, cls, topic))
                    expected["subscriptions", f"rt/{topic}/_action/feedback"] = entry.components[
                        f"{entry.type}_FeedbackMessage"
                    ]
                    expected["publishers", f"rq/{topic}/_action/send_goalRequest"] = entry.components[
                        f"{entry.type}_SendGoal_Request"
                    ]
            announced = _announced(node, expected)
            assert announced == expected
            # Jazzy's Context.shutdown leaves a node's participant alive (Kilted's destroys it).
            node.destroy_node()
        finally:
            rclpy.shutdown(context=context)


def _announced(node: Any, expected: dict[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    """The hash the graph reports for each (endpoint kind, DDS topic) of ``expected``, from the
    node's own endpoints. rmw_fastrtps_cpp enters a node's endpoints into its graph cache when
    they are created, so no discovery wait is needed."""
    found: dict[tuple[str, str], str] = {}
    for kind, topic in expected:
        query = (
            node.get_publishers_info_by_topic
            if kind == "publishers"
            else node.get_subscriptions_info_by_topic
        )
        for info in query(topic, no_mangle=True):
            if info.node_name == node.get_name():
                found[kind, topic] = str(info.topic_type_hash)
    return found
