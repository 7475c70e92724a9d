"""`python -m kueue_doctor`: the same as the `kueue-doctor` command."""

from .cli import main

raise SystemExit(main())
