"""The corpus checked against Kubernetes' own DRA CEL code (the Go oracle in this folder).

Each case is (expression, driver, device). ``golden.jsonl`` holds what
k8s.io/dynamic-resource-allocation v0.37.2 ``CompileCELExpression`` (as the API
server checks a new selector) + ``DeviceMatches`` answered for it: ``result`` (bool), ``error`` (runtime) or
``compile_error``. Regenerate with ``python tests/cel/oracle/regenerate.py``
(needs Go and the module cache of tools/ktestenv).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
GOLDEN = HERE / "golden.jsonl"
DEVICES = HERE / "devices.json"
GPU = "device.attributes['gpu.nvidia.com']"
CAP = "device.capacity['gpu.nvidia.com']"

QUANTITY_STRINGS = [
    "0",
    "1",
    "-1",
    "+1",
    "00",
    "-",
    "+",
    ".",
    "-.",
    ".5",
    "5.",
    "1.G",
    "0.5",
    "1.5",
    "1.0000000001",
    "-1.0000000001",
    "0.0000000001",
    "1n",
    "1u",
    "1m",
    "1000m",
    "1k",
    "1K",
    "1M",
    "1G",
    "1T",
    "1P",
    "1E",
    "1Ki",
    "1Mi",
    "1Gi",
    "1Ti",
    "1Pi",
    "1Ei",
    "7Ei",
    "8Ei",
    "16Ei",
    "-8Ei",
    "0.5Ki",
    "1.1Ki",
    "1.0000000001Ki",
    "80Gi",
    "81559Mi",
    "143771Mi",
    "1e3",
    "1E3",
    "1e+3",
    "1e-3",
    "1.5e3",
    "1e-10",
    "1e100",
    "1e-100",
    "123456789012345678901234",
    "1i",
    "1e",
    "1Mi5",
    "1 Gi",
    " 1",
    "1.5.5",
    "abc",
    "1KiB",
    "100M",
    "0.1",
    "9223372036854775807",
    "9223372036854775808",
    "10.0",
]
SEMVER_STRINGS = [
    "1.0.0",
    "580.95.5",
    "580.95.05",
    "v1.2.3",
    "1.2",
    "1",
    "01.2.3",
    "1.02.3",
    "1.2.03",
    "1.2.3-rc.1",
    "1.2.3-rc.01",
    "1.2.3-0",
    "1.2.3-alpha",
    "1.2.3+build.5",
    "1.2.3-beta+exp.sha.5114f85",
    "1.2.3-",
    "1.2.3+",
    "",
    "a.b.c",
    "1.2.3.4",
    "1.2-rc.1",
    "13.0.0",
    "9.0.0",
    "18446744073709551615.0.0",
]
SEMVER_ORDER = [
    "1.0.0-alpha",
    "1.0.0-alpha.1",
    "1.0.0-alpha.beta",
    "1.0.0-beta",
    "1.0.0-beta.2",
    "1.0.0-beta.11",
    "1.0.0-rc.1",
    "1.0.0",
    "1.0.1",
    "1.1.0",
    "2.0.0",
    "10.0.0",
]


def devices() -> dict[str, tuple[str, dict[str, Any]]]:
    """The six devices every selector case runs on, as (driver, ResourceSlice device).

    Kept in this folder (``devices.json``): the fixture H100, A100, H200, two MIG
    devices of the MIG node, and an odd device with bool/int/prerelease/8Ei values.
    """
    raw = json.loads(DEVICES.read_text())
    return {name: (entry["driver"], entry["device"]) for name, entry in raw.items()}


def selector_cases() -> list[str]:
    """Device-reading selectors: the guide's, error semantics, optional chaining, strings."""
    return [
        f"{GPU}.productName.lowerAscii().matches('^.*h100.*$')",
        f"{CAP}.memory.isGreaterThan(quantity('40Gi'))",
        f"{CAP}.memory.compareTo(quantity('40Gi')) >= 0",
        f"{GPU}.driverVersion.compareTo(semver('580.0.0')) >= 0",
        f"{GPU}.driverVersion.isGreaterThan(semver('580.95.05'))",
        f"{GPU}.driverVersion.isGreaterThan(semver('580.95.05', true))",
        f"{GPU}.productName == 'NVIDIA H200'",
        f"{GPU}.architecture == 'Hopper' && {CAP}.memory.isGreaterThan(quantity('100Gi'))",
        f"{GPU}.type == 'mig' && {GPU}.profile == '3g.40gb'",
        f"{CAP}.multiprocessors.isLessThan(quantity('30'))",
        f"{GPU}.cudaComputeCapability.major() >= 9",
        f"{GPU}.cudaComputeCapability.isGreaterThan(semver('8.9.0'))",
        f"{GPU}.cudaDriverVersion.minor() == 0 && {GPU}.cudaDriverVersion.patch() == 0",
        "device.driver == 'gpu.nvidia.com'",
        f"{GPU}.index == 0",
        f"{GPU}.minor == 0",
        f"{GPU}.pcieBusID.startsWith('0000')",
        "device.attributes['resource.kubernetes.io'].pciBusID.startsWith('0000:')",
        "device.attributes['resource.kubernetes.io'].numaNode == 0",
        # the standard numaNode attribute (an int) used right and as another type (1.37)
        "device.attributes['resource.kubernetes.io'].numaNode in [0, 1]",
        "device.attributes['resource.kubernetes.io'].numaNode >= 0.5",
        "device.attributes['resource.kubernetes.io'].numaNode == '0'",
        "device.attributes['resource.kubernetes.io'].numaNode in ['0', '1']",
        "device.attributes['resource.kubernetes.io'].numaNode.startsWith('0')",
        "device.attributes['resource.kubernetes.io'].?numaNode.orValue(-1) == 0",
        "device.attributes['resource.kubernetes.io'].numaNode.includes(0)",
        "device.attributes['resource.kubernetes.io'].pciBusID == 0",
        f"{GPU}.index == 0 || true",
        f"true || {GPU}.index == 0",
        f"{GPU}.index == 0 && false",
        f"has({GPU}.index)",
        f"has({GPU}.productName)",
        "has(device.attributes['nope.example.com'].x)",
        "device.attributes['nope.example.com'].x == 1",
        "device.attributes['nope.example.com'].?x.orValue(1) == 1",
        f"{GPU}.?index.orValue(-1) == -1",
        f"{GPU}.?productName.hasValue()",
        "size(device.attributes['nope.example.com']) == 0",
        f"{GPU}.exists(k, k == 'profile')",
        f"'uuid' in {GPU}",
        f"cel.bind(g, {GPU}, g.architecture == 'Hopper' && g.brand == 'Nvidia')",
        f"{GPU}.productName.split(' ')[1] == 'H100'",
        f"{GPU}.productName.upperAscii().contains('A100')",
        f"{GPU}.productName.indexOf('H') == 7",
        f"{GPU}.productName.replace('NVIDIA ', '').startsWith('H')",
        f"{GPU}.productName.substring(0, 6) == 'NVIDIA'",
        "device.attributes['other.org'].name.lowerAscii() == 'Ünïcode'.lowerAscii()",
        "device.attributes['example.com'].flag",
        "device.attributes['example.com'].count < 0",
        "device.attributes['example.com'].ver.isLessThan(semver('1.2.3'))",
        "device.attributes['example.com'].ver == semver('1.2.3-rc.1')",
        "device.capacity['example.com']['big'].isInteger()",
        "device.capacity['example.com']['big'].asInteger() == 9223372036854775807",
        "device.capacity['example.com'].tiny.sign() == 1",
        "sign(device.capacity['example.com'].tiny) == 1",
        "device.capacity['example.com'].milli.asApproximateFloat() == 1.5",
        "device.capacity['example.com'].milli.add(quantity('500m')) == quantity('2')",
        "device.capacity['example.com'].milli.isInteger()",
        f"{CAP}.memory.asInteger() > 0",
        f"{CAP}.memory == quantity('81559Mi')",
        f"{CAP}.memory.sub(quantity('81559Mi')).sign() == 0",
        f"sign({CAP}.memory.sub(quantity('81559Mi'))) == 0",
        f"{CAP}.memory.add(1).isGreaterThan({CAP}.memory)",
        f"{GPU}.productName",
        f"{GPU}.productName.lowerAsci() == 'x'",
        "quantity(40).isGreaterThan(quantity('1'))",
        "semver('1.0.0').isGreaterThan(quantity('1'))",
        "dev.attributes['gpu.nvidia.com'].x == 1",
        "device.drvier == 'gpu.nvidia.com'",
        "'a' == true",
        "1 + 1",
        f"{GPU}.productName.matches('[')",
        "[1, 2, 3].all(x, x > 0) && {'a': 1}.a == 1",
        "device.attributes['gpu.nvidia.com'].productName.find('H[0-9]+') == 'H100'",
        "sets.contains([1, 2], [1])",
        "sets.intersects([1, 2], [2, 3]) && !sets.equivalent([1], [1, 2])",
        "'123 abc 456'.findAll('[0-9]*') == ['123', '456']",
        "'123 abc 456'.findAll('[0-9]*').size() == 6",
        "'123 abc 456'.findAll('[0-9]+', 1) == ['123']",
        "'123 abc 456'.findAll('[0-9]+', 0).size() == 0",
        "'abc'.find('x') == ''",
        f"{GPU}.productName.find('(?=H)') == ''",
        f"{GPU}.productName.matches('^NVIDIA (H|A)[0-9]+')",
        "[1, 'a'].size() == 2",
        "1.0 < 2",
        "device.attributes['nope.example.com'].size() == 0",
        "device.attributes['example.com'].count < 0.5",
        "device.attributes['example.com'].count == -3.0",
        "device.attributes['example.com'].count < 2u",
        "device.attributes['example.com'].flag == 1",
        f"{CAP}.memory.compareTo(quantity('80Gi')) == 0",
        f"{CAP}.memory == quantity('85899345920')",
        f"{GPU}.uuid.startsWith('GPU-') || {GPU}.uuid.startsWith('MIG-')",
        f"{GPU}.cudaDriverVersion.isGreaterThan(semver('12.8.0'))",
    ]


def library_cases() -> list[str]:
    """Device-independent expressions: quantity and semver parsing, values, ordering."""
    cases = []
    for text in QUANTITY_STRINGS:
        cases.append(f"isQuantity('{text}')")
        cases.append(f"quantity('{text}').sign() >= -1")
        cases.append(f"quantity('{text}').isInteger()")
        cases.append(f"quantity('{text}').compareTo(quantity('1')) == 1")
        cases.append(f"quantity('{text}').compareTo(quantity('1Gi')) == -1")
        cases.append(f"quantity('{text}') == quantity('1000m')")
    for left, right in [
        ("1Gi", "1024Mi"),
        ("1Gi", "1073741824"),
        ("1G", "1000M"),
        ("1G", "1Gi"),
        ("0.5Ki", "512"),
        ("1.1Ki", "1126.4"),
        ("1.0000000001", "1000000001n"),
        ("-1.0000000001", "-1000000001n"),
        ("0.0000000001", "1n"),
        ("8Ei", "9223372036854775807"),
        ("16Ei", "8Ei"),
        ("1e3", "1k"),
        ("1e-3", "1m"),
        ("1E", "1e18"),
        ("1.5e3", "1500"),
        ("1e-10", "1n"),
        ("81559Mi", "85520809984"),
        ("143771Mi", "150754820096"),
        ("1.G", "1G"),
        ("-", "0"),
        (".", "0"),
        (".5", "500m"),
    ]:
        cases.append(f"quantity('{left}') == quantity('{right}')")
        cases.append(f"quantity('{left}').compareTo(quantity('{right}')) == 0")
    cases += [
        "quantity('1k').asInteger() == 1000",
        "quantity('1').add(quantity('500m')).asApproximateFloat() == 1.5",
        "quantity('1').add(2) == quantity('3')",
        "quantity('1').sub(2).sign() == -1",
        "quantity('1.5').asInteger() == 1",
        "quantity('1e30').isInteger()",
        "quantity('1e30').asInteger() > 0",
        "quantity('100Mi').asApproximateFloat() == 104857600.0",
        "quantity('0.1').asApproximateFloat() == 0.1",
        "quantity('1Ki').isGreaterThan(quantity('1k'))",
        "quantity('999m').isLessThan(quantity('1'))",
        "quantity('x') == quantity('1')",
        "quantity('x') == quantity('1') || true",
        "quantity('1').sign() == 1",
    ]
    for text in SEMVER_STRINGS:
        cases.append(f"isSemver('{text}')")
        cases.append(f"isSemver('{text}', true)")
        cases.append(f"semver('{text}').major() >= 0")
        cases.append(f"semver('{text}', true).compareTo(semver('1.2.3')) == 0")
    for index, left in enumerate(SEMVER_ORDER):
        for right in SEMVER_ORDER[index + 1 : index + 3]:
            cases.append(f"semver('{left}').isLessThan(semver('{right}'))")
            cases.append(f"semver('{right}').compareTo(semver('{left}')) == 1")
    cases += [
        "semver('1.2.3+a') == semver('1.2.3+b')",
        "semver('1.2.3') == semver('1.2.3')",
        "semver('v1.2', true) == semver('1.2.0')",
        "semver('01.002.0003', true) == semver('1.2.3')",
        "semver('1.2-rc.1', true).major() == 1",
        "semver('18446744073709551615.0.0').major() < 0",
    ]
    return cases


def typed_cases() -> list[str]:
    """Typed misuse the API server refuses at compile time (and near misses it accepts).

    ``device`` is typed in Kubernetes: capacities are Quantities, ``driver`` a
    string, ``allowMultipleAllocations`` a bool, attributes dynamic. Run on one
    device: the question is compile-or-not, and where.
    """
    memory = f"{CAP}.memory"
    cases = []
    for op in ("==", "!=", "<", "<=", ">", ">="):
        for right in ("40", "'40Gi'", "40.0", "40u", "true", "null"):
            cases.append(f"{memory} {op} {right}")
    for right in (
        "1",
        "1.0",
        "true",
        "null",
        "1u",
        "quantity('1')",
        "semver('1.0.0')",
        "['gpu.nvidia.com']",
        "{'a': 1}",
    ):
        cases.append(f"device.driver == {right}")
        cases.append(f"device.driver != {right}")
    cases += [
        "device.driver > 1",
        "device.driver < 'h'",
        "device.driver + 1 == 'x'",
        "device.driver + 'x' == 'gpu.nvidia.comx'",
        "device.driver.size() > 'a'",
        "device.driver[0] == 'g'",
        "device.driver in 'gpu.nvidia.com'",
        "device.driver in ['gpu.nvidia.com']",
        "device.driver.startsWith(1)",
        "device.driver.matches(1)",
        "device.driver.contains(quantity('1'))",
        "device.driver.lowerAscii() == 1",
        "device.allowMultipleAllocations == 1",
        "device.allowMultipleAllocations == 'true'",
        "device.allowMultipleAllocations && 1",
        "!device.allowMultipleAllocations",
        "device.allowMultipleAllocations.size() == 0",
        "device.allowMultipleAllocations == false",
        "device.allowMultipleAllocations || device.driver",
        # arithmetic across types
        f"{memory} + 1 == quantity('1')",
        f"{memory} - quantity('1') == quantity('1')",
        f"{memory} * 2 == quantity('1')",
        f"{memory} / 2 == quantity('1')",
        f"{memory} % 2 == quantity('1')",
        f"-{memory} == quantity('1')",
        f"{memory} + {memory} == quantity('1')",
        "quantity('1') + quantity('1') == quantity('2')",
        f"{memory}.add(1.0).isInteger()",
        f"{memory}.add('1').isInteger()",
        f"{memory}.sub(1u).isInteger()",
        f"{memory}.add(true).isInteger()",
        f"{memory}.add(semver('1.0.0')).isInteger()",
        f"{memory}.add(1).isInteger()",
        f"{memory}.sub({memory}).isInteger()",
        "semver('1.0.0') + 1 == semver('1.0.1')",
        "1 + 1.0 == 2.0",
        "1 + 1u == 2u",
        "'a' + 1 == 'a1'",
        "1.0 + 1u == 2.0",
        "[1] + ['a'] == [1, 'a']",
        f"{GPU}.driverVersion + 1 == 2",
        f"{GPU}.productName + 1 == 'x'",
        f"{memory}.asInteger() + 1.0 > 0.0",
        f"{memory}.asInteger() > 40",
        f"{memory}.asApproximateFloat() > 40",
        f"{memory}.asApproximateFloat() > 40.0",
        f"{memory}.compareTo(40) > 0",
        f"{memory}.compareTo(quantity('40Gi')) > 0.0",
        f"{memory}.isGreaterThan(40)",
        f"{memory}.isGreaterThan('40Gi')",
        f"{memory}.isLessThan(semver('1.0.0'))",
        f"{memory}.isGreaterThan({GPU}.driverVersion)",
        f"{memory} == {GPU}.driverVersion",
        f"sign({memory}) > 0.0",
        f"sign({memory}) == 1",
        "semver('1.0.0') > semver('0.1.0')",
        "semver('1.0.0').compareTo(quantity('1')) == 0",
        "semver('1.0.0').major() == 1.0",
        "isQuantity(1)",
        "isSemver(1.0)",
        "quantity(1.5).isInteger()",
        "semver(1).major() == 1",
        # wrong arity
        "quantity() == quantity('1')",
        "quantity('1', '2') == quantity('1')",
        "isQuantity()",
        "isQuantity('1', true)",
        "semver() == semver('1.0.0')",
        "semver('1.0.0', true, 1) == semver('1.0.0')",
        "isSemver('1.0.0', true, true)",
        f"{memory}.isGreaterThan()",
        f"{memory}.isGreaterThan(quantity('1'), quantity('2'))",
        f"{memory}.compareTo() == 0",
        f"{memory}.add() == quantity('1')",
        f"{memory}.asInteger(1) > 0",
        f"{memory}.isInteger(true)",
        "sign() == 0",
        f"sign({memory}, 1) == 0",
        "'a'.lowerAscii(1) == 'a'",
        "'a'.split() == ['a']",
        "size() == 0",
        "'a'.matches() ",
        "'a'.startsWith()",
        "semver('1.0.0').major(1) == 1",
        "'abc'.find() == ''",
        "'abc'.findAll('a', 1, 2) == ['a']",
        "sets.contains([1]) ",
        # unknown functions
        f"{memory}.isBigger(quantity('1'))",
        f"{memory}.value() == 1",
        "quantities('1') == quantity('1')",
        "device.driver.toLower() == 'x'",
        "device.driver.lower() == 'x'",
        "lowerAscii(device.driver) == 'x'",
        "semver('1.0.0').isNewerThan(semver('0.1.0'))",
        f"{memory}.sign() == 1",
        f"isInteger({memory})",
        f"{GPU}.productName.foo()",
        f"{GPU}.productName.lowerascii() == 'x'",
        "device.driver.endswith('com')",
        "device.driver.trim() == 'x'",
        "version('1.0.0') == semver('1.0.0')",
        "Quantity('1') == quantity('1')",
        "int(quantity('1')) == 1",
        "string(quantity('1')) == '1'",
        "string(semver('1.0.0')) == '1.0.0'",
        "double(quantity('1')) == 1.0",
        # unknown device fields
        "device.drvier == 'gpu.nvidia.com'",
        "device.attribute['gpu.nvidia.com'].productName == 'x'",
        "device.capacities['gpu.nvidia.com'].memory.isInteger()",
        "device.name == 'gpu-0'",
        "device.allowMultipleAllocation",
        "device.Driver == 'gpu.nvidia.com'",
        "device.pool == 'x'",
        "device.nodeName == 'x'",
        "device.consumesCounters.size() == 0",
        "device.taints.size() == 0",
        "has(device.name)",
        "has(device.driver)",
        "has(device.attributes)",
        "has(device.capacity)",
        "has(device.allowMultipleAllocations)",
        "device.?name.hasValue()",
        "device['driver'] == 'gpu.nvidia.com'",
        "size(device) == 4",
        "device == device",
        "device.attributes.size() > 0",
        "device.capacity.size() > 0",
        "device.capacity.exists(d, d == 'gpu.nvidia.com')",
        f"{CAP}.exists(n, {CAP}[n] > 1)",
        f"{CAP}.all(n, {CAP}[n].isInteger())",
        f"{CAP}.size() == 1",
        f"{CAP}['memory'] > 40",
        "device.capacity.gpu == 1",
        f"cel.bind(c, {CAP}, c.memory > 40)",
        f"cel.bind(c, {CAP}, c.memory.isGreaterThan(quantity('40Gi')))",
        "cel.bind(d, device, d.driver == 'gpu.nvidia.com')",
        "cel.bind(d, device, d.drvier == 'gpu.nvidia.com')",
        "cel.bind(d, device, d.capacity['gpu.nvidia.com'].memory > 40)",
        "[device.driver, 1].size() == 2",
        "{device.driver: 1}[device.driver] == 1",
        f"[{memory}, quantity('1')].size() == 2",
        f"[{memory}, 1].size() == 2",
        "device.attributes['gpu.nvidia.com'].productName > 1",
        "device.attributes['gpu.nvidia.com'].x.y.z == 1",
        # optional-typed misuse
        f"{CAP}.?memory.orValue(0) > 1",
        f"{CAP}.?memory.orValue(quantity('0')).isInteger()",
        f"{CAP}.?memory.orValue(quantity('0')) > 1",
        f"{CAP}.?memory > quantity('1')",
        f"{CAP}.?memory == quantity('1')",
        f"{CAP}.?memory.isGreaterThan(quantity('1'))",
        f"{CAP}.?memory.hasValue()",
        f"{CAP}.?memory.value().isInteger()",
        f"{CAP}.?memory.value() > 1",
        "device.capacity[?'gpu.nvidia.com'].hasValue()",
        "device.capacity[?'gpu.nvidia.com'].orValue(1) == 1",
        f"{CAP}[?'memory'].orValue(1) == 1",
        "device.?driver.orValue(1) == 1",
        "device.?driver.orValue('') == ''",
        "device.?driver == 'x'",
        "device.driver.?x.hasValue()",
        "optional.of(1).orValue('a') == 1",
        "optional.none().value() == 1",
        "optional.of(device.driver).value() == 1",
        f"optional.of({memory}).value() > 1",
        f"{GPU}.?productName.orValue(1) == 1",
        f"{GPU}.?productName.value() == 'x'",
        f"{GPU}.?productName == 'x'",
        "device.allowMultipleAllocations.?x.hasValue()",
        "device.?allowMultipleAllocations.orValue(1) == 1",
        # positions across lines
        "device.driver == 'gpu.nvidia.com' &&\n  device.capacity['gpu.nvidia.com'].memory > 40",
        "device.driver == 'gpu.nvidia.com' &&\n  device.drvier == 'x'",
        "device.driver == 'gpu.nvidia.com' &&\n\n    device.capacity['gpu.nvidia.com'].memory.isGreaterThan(40)",
        # result types that are not bool
        "device.driver",
        memory,
        "device.capacity",
        "device.attributes['gpu.nvidia.com']",
        f"{memory}.asInteger()",
        f"{memory}.asApproximateFloat()",
        "semver('1.0.0')",
        f"{CAP}.?memory",
        "null",
        "[true]",
    ]
    return cases


def difference_cases() -> list[tuple[str, str]]:
    """(expression, device) around the differences fleet's CEL (cel-cpp) had or has from cel-go.

    docs/cel.md "Differences from Kubernetes": cross-type numeric relations,
    homogeneous aggregate literals, ``device`` aliased with ``cel.bind``,
    equality between Kubernetes types and other values, and the quantity
    representation behind ``isInteger``/``asInteger``. The ``amounts`` device
    publishes capacities spelled in every representation Kubernetes keeps.
    """
    memory = f"{CAP}.memory"
    version = f"{GPU}.driverVersion"
    relations = [
        "1 < 2.5",
        "2.5 > 1",
        "1u < 2",
        "2 > 1u",
        "1u <= 1.0",
        "-1 < 0u",
        "1.5 >= 1",
        "2 <= 2.0",
        "double(1) < 2u",
        "1 < 0.0/0.0",
        "!(1 >= 0.0/0.0)",
        "9223372036854775807 < 9223372036854775808.0",
        "-1 < 18446744073709551615u",
        "18446744073709551615u > 1.8446744073709552e19",
        "1 < 'a'",
        "1.0 > true",
        "1 == 1.0",
        "1 != 1u",
        f"{memory}.asInteger() > 1.5",
        f"{memory}.compareTo(quantity('1')) >= 0u",
        f"{GPU}.cudaComputeCapability.major() >= 9.0",
        f"{GPU}.index < 1.5",
        f"{memory}.asApproximateFloat() >= 85520809984",
    ]
    literals = [
        "[1, 2.0].size() == 2",
        "[1, 1u].size() == 2",
        "[[1], ['a']].size() == 2",
        "[null, 1].size() == 2",
        "[1, null].size() == 2",
        "[null, quantity('1')].size() == 2",
        f"[{GPU}.productName, 1].size() == 2",
        "[1, dyn('a')].size() == 2",
        "{'a': 1, 'b': 'x'}.size() == 2",
        "{'a': 1, 2: 3}.size() == 2",
        "{1: 'a', 2u: 'b'}.size() == 2",
        "[1, 'a', 'b', 2.0].size() == 4",
        "[[], [1]].size() == 2",
        "[{'a': 1}, {'b': 'x'}].size() == 2",
        "[optional.of(1), optional.of('a')].size() == 2",
        "[?optional.of(1), 'a'].size() == 2",
        "[?optional.of(1), 2].size() == 1",
        "[semver('1.0.0'), quantity('1')].size() == 2",
        "[device.driver, 'x'].size() == 2",
        "[1, 'a'].size() == 2 && device.drvier == 'x'",
        "device.drvier == 'x' && [1, 'a'].size() == 2",
        "[1, 2].exists(x, [x, 'a'].size() == 2)",
        "[1,\n 'a'].size() == 2",
        f"[{memory}, {memory}.add(1)].size() == 2",
        "[device.allowMultipleAllocations, 1].size() == 2",
    ]
    binds = [
        f"cel.bind(d, device, d.{memory[7:]}.isGreaterThan(quantity('40Gi')))",
        f"cel.bind(d, device, d.{memory[7:]} == 1)",
        f"cel.bind(dev, device, dev.{memory[7:]} > 40 && dev.driver == 'x')",
        f"cel.bind(devicealias, device, devicealias.{memory[7:]} > 40)",
        "cel.bind(d, device, has(d.capacity))",
        "cel.bind(d, device, [1].all(d, d > 0))",
        "cel.bind(d, device, d.capacity['gpu.nvidia.com'].size() > 0)",
        f"cel.bind(d, device, cel.bind(e, d, e.{memory[7:]} > 40))",
        f"cel.bind(d, device, d.drvier == 'x' || d.{memory[7:]} > 40)",
        f"cel.bind(d, device,\n  d.{memory[7:]} > 40)",
    ]
    equalities = [
        f"{memory} != {version}",
        f"{version} == {memory}",
        f"{GPU}.productName == {memory}",
        f"{version} == semver('580.95.5')",
        f"{GPU}.productName != semver('1.0.0')",
        f"{memory} == dyn(1)",
        f"dyn({memory}) == 1",
        f"{version} == '580.95.05'",
        f"{version} != '580.95.05'",
        f"{memory} == dyn({memory})",
        f"{memory} in [dyn(1)]",
        f"{version} == null",
    ]
    cases = [(expr, "h100") for expr in relations + literals + binds + equalities]
    amounts = ["m1000", "d10", "ti", "pi", "i64max", "d18", "e3", "halfki", "neg", "dec"]
    for name in amounts:
        capacity = f"device.capacity['example.com'].{name}"
        cases += [
            (f"{capacity}.isInteger()", "amounts"),
            (f"{capacity}.asInteger() > 0", "amounts"),
            (f"{capacity}.add(1).isInteger()", "amounts"),
            (f"{capacity}.sub(quantity('1m')).isInteger()", "amounts"),
            (f"{capacity}.add({capacity}).isInteger()", "amounts"),
        ]
    cases += [
        ("device.capacity['example.com'].pi.add(1) == device.capacity['example.com'].pi", "amounts"),
        ("cel.bind(q, quantity('1Pi'), q.add(1) == q)", "h100"),
        ("cel.bind(q, quantity('1Pi'), q.sub(q).isInteger() || q == quantity('0'))", "h100"),
        ("[device.attributes['gpu.nvidia.com'].driverVersion] == ['580.95.05']", "h100"),
        (f"{GPU}.driverVersion == {GPU}.productName", "h100"),
        (f"{GPU}.productName == {GPU}.driverVersion", "h100"),
        (f"{GPU}.driverVersion in ['580.95.05']", "h100"),
        (f"{GPU}.index == 0 || {GPU}.driverVersion == 'x'", "h100"),
        (f"{GPU}.index in []", "h100"),
        (f"!({GPU}.driverVersion in [])", "h100"),
        (f"{GPU}.productName in ['NVIDIA H100 80GB HBM3', 'x']", "h100"),
        (f"{GPU}.productName in [device.driver, 'x']", "h100"),
        (f"{GPU}.driverVersion in [semver('580.95.5')]", "h100"),
        ("1.0 in [1, 2]", "h100"),
        ("dyn(2u) in [1, 2]", "h100"),
        ("dyn(true) in [1, 2]", "h100"),
        ("0.0/0.0 < 1.0", "h100"),
        ("double('NaN') >= 0.0", "h100"),
        ("0.0/0.0 == 0.0/0.0", "h100"),
        ("0.0/0.0 != 1.0", "h100"),
        ("[1.0].exists(x, (x == 1.0 ? 0.0/0.0 : 1.0) < 2.0)", "h100"),
        ("(device.driver == 'gpu.nvidia.com' ? 1.0 : 2.0) < 1.5", "h100"),
        ("cel.bind(q, quantity('1000m'), q == quantity('1') && !q.isInteger())", "h100"),
        ("cel.bind(q, quantity('1000m'), [quantity('1')].all(q, q.isInteger()))", "h100"),
        ("cel.bind(s, '1000m', cel.bind(q, quantity(s), ['1'].all(s, q.isInteger())))", "h100"),
        ("cel.bind(c, device.capacity['example.com'], c.m1000.isInteger())", "amounts"),
        ("cel.bind(d, device, d.capacity['example.com'].m1000.isInteger())", "amounts"),
        (
            "device.capacity['example.com'].all(n, n != 'm1000' || !device.capacity['example.com'][n].isInteger())",
            "amounts",
        ),
        ("[quantity('1000m'), quantity('1')][0].isInteger()", "h100"),
        ("[quantity('1000m')].all(q, !q.isInteger())", "h100"),
        ("[quantity('1000m')].all(q, q == quantity('1') && !q.isInteger())", "h100"),
        ("[quantity('1000m')].all(q, q in [quantity('1')] && !q.isInteger())", "h100"),
        ("[quantity('1000m')].all(q, sets.contains([quantity('1')], [q]) && !q.isInteger())", "h100"),
        ("[quantity('1000m')].all(q, [q] == [quantity('1')] && !q.isInteger())", "h100"),
        ("[quantity('1000m')].all(q, {'a': q} == {'a': quantity('1')} && !q.isInteger())", "h100"),
        ("[quantity('1000m')].all(q, optional.of(q) == optional.of(quantity('1')) && !q.isInteger())", "h100"),
        ("[quantity('1000m')].all(q, q.compareTo(quantity('1')) == 0 && q.asApproximateFloat() == 1.0)", "h100"),
        ("[quantity('1000m'), quantity('2')].filter(q, q.isGreaterThan(quantity('1'))).all(q, q.isInteger())", "h100"),
        ("[quantity('1000m')].map(q, q.add(1)).all(q, q.isInteger())", "h100"),
        ("{'a': quantity('10.0')}['a'].isInteger()", "h100"),
        ("optional.of(quantity('1000m')).value().isInteger()", "h100"),
        ("quantity('1000m') == quantity('1') && quantity('1000m').isInteger()", "h100"),
        ("quantity('1000m').add(quantity('1')).isInteger()", "h100"),
        ("quantity('1').add(quantity('1000m')).isInteger()", "h100"),
        ("quantity('1Ti').add(quantity('1')).isInteger()", "h100"),
        ("quantity('123456789012345678').add(1).isInteger()", "h100"),
        ("quantity('1').sub(quantity('1')).isInteger()", "h100"),
        ("quantity('0.5').add(quantity('0.5')).isInteger()", "h100"),
        ("quantity('1000m') == quantity('1')", "h100"),
        ("quantity('10.0').asInteger() == 10", "h100"),
        ("cel.bind(q, quantity('1000m'), q.isInteger())", "h100"),
        ("(true ? quantity('1000m') : quantity('1')).isInteger()", "h100"),
        ("quantity('1e30').add(1) == quantity('1e30')", "h100"),
        ("cel.bind(q, quantity('1e30'), q.add(1) == q)", "h100"),
        ("device.capacity['example.com'].dec.add(1) == device.capacity['example.com'].dec", "amounts"),
        (f"{CAP}.?memory.orValue(quantity('1000m')).isInteger()", "h100"),
        (f"{CAP}[?'nope'].orValue(quantity('1000m')).isInteger()", "h100"),
    ]
    return cases


def all_cases() -> list[tuple[str, str, str]]:
    """(expression, device name) pairs, with device-independent cases on one device."""
    names = [name for name in devices() if name != "amounts"]
    cases = [(expr, name, "selector") for expr in selector_cases() for name in names]
    cases += [(expr, "h100", "library") for expr in library_cases()]
    cases += [(expr, "h100", "typed") for expr in typed_cases()]
    cases += [(expr, name, "differences") for expr, name in difference_cases()]
    return cases


def load_golden() -> list[dict[str, Any]]:
    return [json.loads(line) for line in GOLDEN.read_text().splitlines() if line.strip()]
