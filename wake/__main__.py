from __future__ import annotations

from wake.cli.main import main

if __name__ == "__main__":
    main()
