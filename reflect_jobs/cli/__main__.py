"""``python -m reflect_jobs.cli``: the same CLI as the ``reflect-jobs`` console script."""

from . import main

if __name__ == "__main__":
    main()
