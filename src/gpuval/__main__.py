from gpuval.cli import main

raise SystemExit(main())
