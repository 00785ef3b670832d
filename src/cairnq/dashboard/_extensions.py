"""Which extensions' pages the dashboard shows, and where their templates are.

Each extension with pages (``Extension.pages``) names the module the dashboard
asks for its page set (``pages(host)``), and keeps its templates in the
``templates/`` folder of its package, when it has any: cairnq's own in the
module that declares it, one outside cairnq in its ``package``. The dashboard's
template environment looks in cairnq's folder first, then in each extension's.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources

from jinja2 import ChoiceLoader, Environment, PackageLoader

from ..extensions import Extension, builtins


def has_templates(package: str) -> bool:
    """Whether ``package`` has a ``templates/`` folder (pages may have none of their own)."""
    return resources.files(package).joinpath("templates").is_dir()


# cairnq's own extensions' names with their page modules, and the packages whose
# ``templates/`` hold their templates.
EXTENSION_PAGES = tuple((ext.name, ext.pages) for ext in builtins() if ext.pages is not None)
EXTENSION_TEMPLATES = tuple(
    type(ext).__module__
    for ext in builtins()
    if ext.pages is not None and has_templates(type(ext).__module__)
)


def templates_package(extension: Extension) -> str:
    """The package whose ``templates/`` folder holds ``extension``'s templates."""
    return extension.package or type(extension).__module__


def page_modules(
    environment: Environment, extras: Sequence[Extension]
) -> tuple[tuple[str, str], ...]:
    """The names and page modules of cairnq's extensions and of ``extras``, in that
    order, once ``environment`` finds the templates of ``extras`` too (``add_templates``)."""
    add_templates(environment, extras)
    return (*EXTENSION_PAGES, *((e.name, e.pages) for e in extras if e.pages is not None))


def add_templates(environment: Environment, extensions: Sequence[Extension]) -> None:
    """Let ``environment`` find the templates of ``extensions`` with pages too (after
    those it finds already; a package already searched is not added again)."""
    loader = environment.loader
    assert isinstance(loader, ChoiceLoader)
    searched = {getattr(known, "package_name", None) for known in loader.loaders}
    for extension in extensions:
        package = templates_package(extension)
        if extension.pages is not None and package not in searched and has_templates(package):
            loader.loaders = [*loader.loaders, PackageLoader(package, "templates")]
            searched.add(package)
