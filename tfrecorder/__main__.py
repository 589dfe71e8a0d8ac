from tfrecorder.cli import main

raise SystemExit(main())
