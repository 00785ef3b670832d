"""Which extensions' pages the dashboard shows, and where their templates and static
files are.

Each extension with pages (``Extension.pages``) names the module the dashboard
asks for its page set (``pages(host)``), and keeps its templates in the
``templates/`` folder of its package, when it has any: cairnq's own in the
module that declares it, one outside cairnq in its ``package``. The dashboard's
template environment looks in cairnq's folder first, then in each extension's.

An extension with pages may also ship a ``static/`` folder: the dashboard serves it
under ``/static/x/<name>/`` (behind the same guard and Content-Security-Policy as
its own files) and links each of its stylesheets (``*.css``) from every page.
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


# Where the static files of an extension named ``name`` are served: ``/static/x/<name>``.
STATIC_PREFIX = "/static/x"


def templates_package(extension: Extension) -> str:
    """The package whose ``templates/`` folder holds ``extension``'s templates."""
    return extension.package or type(extension).__module__


def static_packages(extras: Sequence[Extension]) -> tuple[tuple[str, str], ...]:
    """``(name, package)`` of cairnq's extensions and of ``extras`` with pages whose
    package has a ``static/`` folder, in that order."""
    return tuple(
        (extension.name, templates_package(extension))
        for extension in (*builtins(), *extras)
        if extension.pages is not None and has_static(templates_package(extension))
    )


def has_static(package: str) -> bool:
    """Whether ``package`` has a ``static/`` folder."""
    return resources.files(package).joinpath("static").is_dir()


def stylesheets(statics: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """The paths of the stylesheets of ``statics`` (``static_packages``), each
    extension's in name order."""
    return tuple(
        f"{STATIC_PREFIX}/{name}/{file.name}"
        for name, package in statics
        for file in sorted(
            resources.files(package).joinpath("static").iterdir(), key=lambda f: f.name
        )
        if file.name.endswith(".css") and file.is_file()
    )


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
