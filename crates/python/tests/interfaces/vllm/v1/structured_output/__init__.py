"""Stand-in: the engine module that names the xgrammar backend class it builds."""


class XgrammarBackend:
    pass
