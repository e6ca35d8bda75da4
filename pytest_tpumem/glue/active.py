"""The names the active part is registered under as plugins, under --tpumem: the Reporter
(glue/reporter.py, per run), the Measurer (glue/measure.py, per test) and the suite ledger
(glue/ledger.py); absent while the plugin is off. The Measurer and the Reporter are also reached
through ``config.stash``, by the keys their own modules define beside them: ``measure.MEASURER``
and ``reporter.REPORTER``."""

NAMES = ("tpumem-reporter", "tpumem-measurer", "tpumem-ledger")  # the names they are registered under, as plugins
