"""Packaging glue that pyproject.toml cannot express: the checkout's top-level ``resources/``
(the sample corpus) ships inside the wheel as ``vrag_desktop/resources``, where
:func:`vrag_desktop.core.paths.resources_dir` finds it. Everything else is in pyproject.toml."""

from setuptools import find_namespace_packages, find_packages, setup

# Each folder under resources/ is a data-only (namespace) package, so its files travel as package data.
RESOURCES = ["vrag_desktop.resources"] + [
    f"vrag_desktop.resources.{name}" for name in find_namespace_packages(where="resources")
]

setup(
    packages=find_packages(include=["vrag_desktop", "vrag_desktop.*"]) + RESOURCES,
    package_dir={"vrag_desktop.resources": "resources"},
    package_data={"vrag_desktop": ["py.typed"], **{name: ["*", ".*"] for name in RESOURCES}},
)
