"""``control_msgs/action/ParallelGripperCommand`` (the Hand-E's action on EROBS's cell) has the
upstream RIHS01 hashes.

``../shared/interop/type-hashes.json`` does not list this type, so its hashes are pinned here.
They were computed from the unmodified upstream file (ros-controls/control_msgs
``control_msgs/action/ParallelGripperCommand.action``, ``jazzy`` @ f901df2 = 5.8.0; ``master``
@ 13dacdd = 6.8.0 has the same file) with rosidl_adapter and
rosidl_generator_type_description 4.9.5 (Kilted's, requirements-build-kilted.txt), the way
type-hashes.json's README describes; the type references only sensor_msgs/JointState, whose
hash is the same in the Jazzy (5.3.6) and Kilted (5.5.1) sensor_msgs wheels, so Jazzy and Kilted
share them (this test passes on both venvs). The built type's hash is read
from its loaded C type support (:func:`interop.built_type_hash`).
"""

from __future__ import annotations

import pytest
from interop import built_type_hash

UPSTREAM = {
    "": "RIHS01_adfd3c1ebe8abc38ebcc0e454b6423d291d4010dd5697d14eca5b9be4726ae18",
    "_Goal": "RIHS01_412807b6b6acf2bf406fb0cf3b5c8f84286cd4e4d425734155aa1ff41caa0063",
    "_Result": "RIHS01_51acbcd62aa44097d3877c506eab1146856fa8768628ffbe102c1699152d2afa",
    "_Feedback": "RIHS01_ed6f7c4e5aea7f960432663c0e762e001a0a1f5cc0130d126e60041412d0543c",
    "_FeedbackMessage": "RIHS01_c61f4cf99d06c5a3e24bed17c2910bdf66a30d89461e2ac7b5fd538a34b022cc",
    "_SendGoal": "RIHS01_567c37373fed1260adbe047415688c73e4f3e94b2e3982761ecc71fd63d710a7",
    "_SendGoal_Request": "RIHS01_dc8e5d95c0e15af6f03ff237eb8cfdaac14cc2b09f51b363311e98ec0a8487a0",
    "_SendGoal_Response": "RIHS01_613e4f060bff03b152eeaba1f8c6baa9d0309527b28b08bc9aae28ece7ef8b47",
    "_SendGoal_Event": "RIHS01_b6164adce06de27a3ebd924f198539baf7f929315c825b266c8827de4ca79384",
    "_GetResult": "RIHS01_e4c7f0e8a831ce5625ed20abcd13796406d945f92ebc7ad5972e0b0d29b381bd",
    "_GetResult_Request": "RIHS01_cea82415cadc3288fdfa8aaba509e9939732aaecac6edf9cb954e5a7161646ec",
    "_GetResult_Response": "RIHS01_c973b1bb9b454de1c3f38a2af9d45bc1930b809f746d6d6ec91bb3c783cb09eb",
    "_GetResult_Event": "RIHS01_bb81e07fe7a231c5de7b957f0384ea31600b8a808cf83e820e213b7216ebf12e",
}


@pytest.mark.parametrize("part", sorted(UPSTREAM))
def test_parallel_gripper_command_has_the_upstream_hash(part: str) -> None:
    name = f"control_msgs/action/ParallelGripperCommand{part}"
    assert built_type_hash(name) == UPSTREAM[part], name
