from patchkit.cli import main

raise SystemExit(main())
